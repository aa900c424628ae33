"""The language server's wiring: document events to debounced checks in one background thread
(so requests are answered while a check runs), the results published as diagnostics, hover and
code actions served from the last results, and config or project changes re-checking every
open document. Works for any number of workspace folders: each document finds its own config."""
from __future__ import annotations

import asyncio
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from graphlint import __version__
from graphlint.server import actions, diagnostics as diagnostic_view, hover as hover_view
from graphlint.server.docs import docs_file, rule_markdown
from graphlint.server.linting import lint_document

CONFIG_NAMES = ("pyproject.toml", "graphlint.toml")
DEBOUNCE_SECONDS = float(os.environ.get("GRAPHLINT_LSP_DEBOUNCE", "0.3"))


class GraphlintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("graphlint", __version__)
        self.published: dict[str, list[types.Diagnostic]] = {}  # uri -> the last diagnostics sent
        self.pending: dict[str, asyncio.Task] = {}
        self.docs_folder: dict[str, Path] = {}  # uri -> where its rule pages are written
        # One thread: checks run one at a time, off the event loop; the engine's worker
        # processes are children of this long-lived thread.
        self.checker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="graphlint-check")

    def workspace_root(self, path: Path) -> Path | None:
        """The innermost workspace folder that holds `path`."""
        folders = [Path(to_fs_path(folder.uri)) for folder in self.workspace.folders.values()]
        if self.workspace.root_path:
            folders.append(Path(self.workspace.root_path))
        holding = [folder for folder in folders if path == folder or folder in path.parents]
        return max(holding, key=lambda folder: len(folder.parts)) if holding else None

    def schedule(self, uri: str, delay: float) -> None:
        """Check `uri` after `delay` seconds, replacing a check already waiting for it."""
        waiting = self.pending.pop(uri, None)
        if waiting is not None:
            waiting.cancel()
        self.pending[uri] = asyncio.get_running_loop().create_task(self._check_later(uri, delay))

    def schedule_all(self) -> None:
        for uri in list(self.workspace.text_documents):
            self.schedule(uri, 0)

    async def _check_later(self, uri: str, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        try:
            await self._check(uri)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - one failed check must not stop the server
            self.window_log_message(types.LogMessageParams(
                types.MessageType.Error, f"graphlint: checking {uri} failed: {type(error).__name__}: {error}"))

    async def _check(self, uri: str) -> None:
        document = self.workspace.get_text_document(uri)
        if not document.path.endswith(".py"):
            return
        version, text = document.version, document.source
        path = Path(document.path)
        result = await asyncio.get_running_loop().run_in_executor(
            self.checker, lint_document, path, text, self.workspace_root(path))
        if uri not in self.workspace.text_documents or self.workspace.get_text_document(uri).version != version:
            return  # edited (or closed) meanwhile: the newer check publishes
        folder = result.config.root / ".graphlint_cache"
        self.docs_folder[uri] = folder

        def docs_uri(code: str) -> str | None:
            page = docs_file(code, folder)
            return page.as_uri() if page else None

        found = ([diagnostic_view.error_diagnostic(result.error)] if result.error
                 else diagnostic_view.to_diagnostics(result.findings, text, docs_uri))
        self.published[uri] = found
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, version=version,
                                                                              diagnostics=found))


def _is_config(uri: str) -> bool:
    return uri.rsplit("/", 1)[-1] in CONFIG_NAMES


def make_server() -> GraphlintServer:
    server = GraphlintServer()

    @server.feature(types.INITIALIZED)
    async def initialized(ls: GraphlintServer, params: types.InitializedParams) -> None:
        # Where the client can watch files for us: config edits and other modules (regions
        # depend on the whole project) re-check the open documents.
        watch = ls.client_capabilities.workspace and ls.client_capabilities.workspace.did_change_watched_files
        if watch and watch.dynamic_registration:
            watchers = [types.FileSystemWatcher(glob_pattern=f"**/{name}") for name in (*CONFIG_NAMES, "*.py")]
            try:
                await ls.client_register_capability_async(types.RegistrationParams(registrations=[types.Registration(
                    id="graphlint-watch", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                    register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=watchers))]))
            except Exception as error:  # noqa: BLE001 - a client that refuses: saves still re-check
                ls.window_log_message(types.LogMessageParams(types.MessageType.Warning,
                                                             f"graphlint: no file watching ({error})"))

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: GraphlintServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: GraphlintServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, DEBOUNCE_SECONDS)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: GraphlintServer, params: types.DidSaveTextDocumentParams) -> None:
        if _is_config(params.text_document.uri):
            ls.schedule_all()
        else:
            ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: GraphlintServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        waiting = ls.pending.pop(uri, None)
        if waiting is not None:
            waiting.cancel()
        ls.published.pop(uri, None)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched_files(ls: GraphlintServer, params: types.DidChangeWatchedFilesParams) -> None:
        if any(_is_config(change.uri) or change.uri.endswith(".py") for change in params.changes):
            ls.schedule_all()

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def folders_changed(ls: GraphlintServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
        ls.schedule_all()

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: GraphlintServer, params: types.HoverParams) -> types.Hover | None:
        return hover_view.hover(ls.published.get(params.text_document.uri, []), params.position)

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION,
                    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]))
    def code_action(ls: GraphlintServer, params: types.CodeActionParams) -> list[types.CodeAction | types.Command]:
        uri = params.text_document.uri
        text = ls.workspace.get_text_document(uri).source
        return actions.code_actions(uri, text, ls.published.get(uri, []), params.range)

    @server.command(actions.SHOW_DOCS)
    async def show_docs(ls: GraphlintServer, code: str, *rest) -> str | None:
        """Open the rule's page; the Markdown is also the command's result, for clients that
        cannot show a document."""
        text = rule_markdown(str(code))
        if text is None:
            return None
        folder = next(iter(ls.docs_folder.values()), Path.cwd() / ".graphlint_cache")
        page = docs_file(str(code), folder)
        show = ls.client_capabilities.window and ls.client_capabilities.window.show_document
        if page is not None and show and show.support:
            await ls.window_show_document_async(types.ShowDocumentParams(uri=page.as_uri(), take_focus=True))
        return text

    return server


def serve() -> None:
    """Speak LSP on stdin and stdout until the client says exit.

    The protocol gets private copies of the two pipes, and fds 0 and 1 become /dev/null and
    stderr: a stray print (from graphlint or a worker process) cannot corrupt the stream, and
    the engine's forked workers, which close `sys.stdin` as they start, never wait for the lock
    of the file object that the protocol's reader thread holds while it reads."""
    protocol_in = os.fdopen(os.dup(sys.stdin.fileno()), "rb")
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(sys.stderr.fileno(), 1)
    sys.stdin = open(os.devnull, encoding="utf-8")
    sys.stdout = sys.stderr
    make_server().start_io(protocol_in, protocol_out)
