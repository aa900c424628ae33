"""`graphlint server` end to end with a real LSP client (pytest-lsp): diagnostics on open,
an edit that removes the hazard clears them, hover shows the rule's docs, code actions insert
a suppression (applied, the diagnostic goes) and open the docs, config edits re-check, and
each workspace folder uses its own config."""
from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp")
pytest.importorskip("pygls")
from lsprotocol import types  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

HAZARD = ("import torch\n\n\n"
          "def decode_step(x: torch.Tensor):\n"
          "    n = x.max().item()\n"
          "    return x * n\n")
FIXED = HAZARD.replace("    n = x.max().item()\n", "    n = x.max()\n")
ENV = {**os.environ, "GRAPHLINT_LSP_DEBOUNCE": "0.05"}


def make_project(folder: Path, config: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text("[tool.graphlint]\n" + config)
    (folder / "step.py").write_text(HAZARD)
    return folder


@pytest.fixture
def workspace(tmp_path) -> tuple[Path, Path]:
    return make_project(tmp_path / "proj_a"), make_project(tmp_path / "proj_b", 'ignore = ["GL101"]\n')


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "graphlint", "server"],
                                              server_env=ENV))
async def client(lsp_client: LanguageClient, workspace):
    folders = [types.WorkspaceFolder(uri=folder.as_uri(), name=folder.name) for folder in workspace]
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("neovim"), root_uri=workspace[0].parent.as_uri(), workspace_folders=folders))
    yield
    await lsp_client.shutdown_session()


async def diagnostics_when(client: LanguageClient, uri: str, predicate, timeout: float = 90):
    """The document's diagnostics once `predicate` holds for them (published by the server)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        found = client.diagnostics.get(uri)
        if found is not None and predicate(found):
            return found
        if loop.time() > deadline:
            raise AssertionError(f"timed out; last diagnostics for {uri}: {found}")
        try:
            await asyncio.wait_for(client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS), 1)
        except asyncio.TimeoutError:
            pass


def open_document(client: LanguageClient, path: Path, text: str) -> str:
    uri = path.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    return uri


def change(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))


def apply(text: str, edits: list[types.TextEdit]) -> str:
    """The text with LSP edits applied (ASCII text: UTF-16 columns are characters)."""
    lines = text.splitlines(keepends=True)
    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        start, end = edit.range.start, edit.range.end
        offset = lambda pos: sum(len(line) for line in lines[:pos.line]) + pos.character  # noqa: E731
        joined = "".join(lines)
        joined = joined[:offset(start)] + edit.new_text + joined[offset(end):]
        lines = joined.splitlines(keepends=True)
    return "".join(lines)


def gl101(found) -> list[types.Diagnostic]:
    return [d for d in found if d.code == "GL101"]


@pytest.mark.asyncio
async def test_hazard_diagnostic_then_an_edit_clears_it(client: LanguageClient, workspace):
    uri = open_document(client, workspace[0] / "step.py", HAZARD)
    found = await diagnostics_when(client, uri, lambda d: bool(gl101(d)))
    [item] = gl101(found)
    assert item.severity == types.DiagnosticSeverity.Error and item.source == "graphlint"
    assert (item.range.start.line, item.range.start.character) == (4, 8)  # `x.max().item()` on line 5
    assert "item-call" in item.message
    docs = Path(item.code_description.href.removeprefix("file://"))
    assert docs.is_file() and "## Why it breaks a CUDA graph" in docs.read_text()
    change(client, uri, 2, FIXED)
    await diagnostics_when(client, uri, lambda d: not gl101(d))


@pytest.mark.asyncio
async def test_hover_shows_the_rule_docs(client: LanguageClient, workspace):
    uri = open_document(client, workspace[0] / "step.py", HAZARD)
    [item] = gl101(await diagnostics_when(client, uri, lambda d: bool(gl101(d))))
    result = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=item.range.start))
    assert result is not None and "GL101" in result.contents.value
    assert "## Why it breaks a CUDA graph" in result.contents.value
    nothing = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(0, 0)))
    assert nothing is None


@pytest.mark.asyncio
async def test_code_actions_suppress_and_open_the_docs(client: LanguageClient, workspace):
    uri = open_document(client, workspace[0] / "step.py", HAZARD)
    [item] = gl101(await diagnostics_when(client, uri, lambda d: bool(gl101(d))))
    offered = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=item.range,
        context=types.CodeActionContext(diagnostics=[item])))
    by_title = {action.title: action for action in offered}
    suppress = by_title["Suppress GL101 (item-call) on this line"]
    edited = apply(HAZARD, suppress.edit.changes[uri])
    assert "    n = x.max().item()  # graphlint: ignore[GL101] -- TODO: why this is safe\n" in edited
    change(client, uri, 2, edited)
    await diagnostics_when(client, uri, lambda d: not gl101(d))  # the suppression applied
    docs = by_title["Show documentation for GL101"]
    assert isinstance(docs, types.Command)
    text = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=docs.command, arguments=docs.arguments))
    assert text.startswith("# GL101 item-call")


@pytest.mark.asyncio
async def test_config_edit_rechecks_and_each_folder_has_its_own_config(client: LanguageClient, workspace):
    first, second = workspace
    uri_a = open_document(client, first / "step.py", HAZARD)
    uri_b = open_document(client, second / "step.py", HAZARD)
    await diagnostics_when(client, uri_a, lambda d: bool(gl101(d)))
    await diagnostics_when(client, uri_b, lambda d: not gl101(d))  # proj_b ignores GL101
    (first / "pyproject.toml").write_text('[tool.graphlint]\nignore = ["item-call"]\n')
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[types.FileEvent(
        uri=(first / "pyproject.toml").as_uri(), type=types.FileChangeType.Changed)]))
    await diagnostics_when(client, uri_a, lambda d: not gl101(d))
