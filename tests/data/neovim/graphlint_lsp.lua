-- Headless Neovim as a user configures it: the README's vim.lsp.config set-up on 0.11+, the
-- older vim.lsp.start_client on earlier versions. Writes each graphlint diagnostic of the
-- current buffer to $GRAPHLINT_NVIM_OUT as "line:col code message", then quits.
local cmd = { os.getenv("GRAPHLINT_BIN"), "server" }
local out = os.getenv("GRAPHLINT_NVIM_OUT")
if vim.lsp.config and vim.lsp.enable then
  vim.lsp.config("graphlint", {
    cmd = cmd,
    filetypes = { "python" },
    root_markers = { "graphlint.toml", "pyproject.toml", ".git" },
  })
  vim.lsp.enable("graphlint")
  vim.cmd("filetype on")
  vim.cmd("edit")  -- FileType fires again, so the enabled config attaches to this buffer
else
  local id = vim.lsp.start_client({ name = "graphlint", cmd = cmd, root_dir = vim.fn.getcwd() })
  vim.lsp.buf_attach_client(0, id)
end
vim.wait(90000, function() return #vim.diagnostic.get(0) > 0 end, 200)
local handle = io.open(out, "w")
for _, d in ipairs(vim.diagnostic.get(0)) do
  local code = d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code) or ""
  handle:write(string.format("%d:%d %s %s\n", d.lnum + 1, d.col + 1, code, d.message))
end
handle:close()
vim.cmd("qa!")
