"""`jobtui serve`: the console in a browser, one console process per browser session.

Binds 127.0.0.1 unless `--host` says otherwise; any other address needs tokens
(`--token-file`, or `$JOBTUI_SERVE_TOKENS`), and it refuses to start without them. Read-only
unless `--allow-writes`. The web server is jobtui/web.py (textual-serve, aiohttp): imported
when the command runs, never when the command line is parsed; the console's own modules
(textual) are imported by each session's process only.
"""

from __future__ import annotations

import os
import shlex
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from jobtui.cli.args import REFRESH, Args, Commands, config_path, positive_int
from jobtui.cli.errors import CliError

if TYPE_CHECKING:
    from jobtui.web import Token

TOKENS_ENV = "JOBTUI_SERVE_TOKENS"
DEFAULT_PORT = 8000


def register(commands: Commands) -> None:
    p = commands.add(
        "serve",
        "Serve the console to browsers (read-only unless --allow-writes).",
        cmd_serve,
        "jobtui serve                                  # http://127.0.0.1:8000/, this machine only",
        "jobtui serve --host 0.0.0.0 --token-file /etc/jobtui/tokens",
        "jobtui serve --host 0.0.0.0 --token-file tokens --allow-writes",
        "A token file has one NAME:SECRET line per web user; open /?token=SECRET. "
        "Writes (with --allow-writes) are audited as web:NAME.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument(
        "--port", type=port_number, default=DEFAULT_PORT, help=f"default: {DEFAULT_PORT}"
    )
    p.add_argument(
        "--token-file",
        metavar="PATH",
        help=f"NAME:SECRET lines, one per web user (default: ${TOKENS_ENV}, same format); "
        "required unless --host is a loopback address",
    )
    p.add_argument(
        "--allow-writes",
        action="store_true",
        help="let web users requeue, cancel, pause… (audited as web:NAME); default read-only",
    )
    p.add_argument(
        "--public-url",
        metavar="URL",
        help="the address browsers use, behind a reverse proxy (e.g. https://ops.example.com)",
    )
    p.add_argument(
        "--max-sessions",
        type=positive_int,
        default=10,
        metavar="N",
        help="browser sessions open at once; each is a console with its own connection "
        "(default: 10)",
    )
    p.add_argument(
        "--config",
        type=config_path,
        metavar="PATH",
        help="console config file for every session (default: $JOBTUI_CONFIG or "
        "~/.config/jobtui/config.toml)",
    )
    p.add_argument("--env", metavar="NAME", help="environment name shown as a banner")
    p.add_argument(
        "--refresh", type=REFRESH, metavar="DURATION", help="refresh interval, 0.5s to 5m, e.g. 2s"
    )


def port_number(text: str) -> int:
    """argparse type: a TCP port, 1 to 65535."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, not {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is from 1 to 65535, not {value}")
    return value


def read_tokens(args: Args) -> tuple[Token, ...]:
    """The tokens from --token-file, else $JOBTUI_SERVE_TOKENS; () when neither is given."""
    from jobtui.web import TokenError, parse_tokens

    path = getattr(args, "token_file", None)
    try:
        if path is not None:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except OSError as exc:
                raise CliError(f"--token-file {path}: {exc.strerror or exc}") from None
            except UnicodeDecodeError:
                raise CliError(f"--token-file {path}: not UTF-8 text") from None
            return parse_tokens(text, path)
        env = os.environ.get(TOKENS_ENV)
        if env is not None:
            return parse_tokens(env, f"${TOKENS_ENV}")
    except TokenError as exc:
        raise CliError(str(exc)) from None
    return ()


def session_command(args: Args, user: str) -> str:
    """The shell command textual-serve runs for one browser session of `user`.

    The same console as `jobtui console`, with the options this command was given. The DSN
    and schema are not on it (a command line is visible to every local user): they reach the
    session in its environment ($JOBTUI_DSN, $JOBTUI_SCHEMA; see `cmd_serve`)."""
    argv = [sys.executable, "-m", "jobtui", "console", "--web-user", user]
    if not args.allow_writes:
        argv.append("--read-only")
    if args.config is not None:
        argv += ["--config", str(Path(args.config).resolve())]
    if args.env is not None:
        argv += ["--env", args.env]
    if args.refresh is not None:
        argv += ["--refresh", f"{args.refresh}s"]
    return "exec " + shlex.join(argv)  # the console is serve's own child, not a shell's


def cmd_serve(args: Args) -> int:
    from jobtui.cli.session import dsn_of, schema_of
    from jobtui.db import check_schema, connect

    try:
        from jobtui import web
    except ImportError as exc:
        raise CliError(
            f"jobtui serve needs textual-serve ({exc}): pip install 'jobtui[web]'"
        ) from None
    tokens = read_tokens(args)
    if not tokens and not web.is_loopback(args.host):
        raise CliError(
            f"--host {args.host} is reachable from other machines: give web users tokens with "
            f"--token-file PATH (NAME:SECRET lines) or ${TOKENS_ENV}"
        )
    if args.allow_writes and not tokens:
        # Without tokens every local user reaches the console, and a write could name no one.
        raise CliError(
            "--allow-writes needs tokens, so that each write names its web user: give them "
            f"with --token-file PATH (NAME:SECRET lines) or ${TOKENS_ENV}"
        )
    if args.public_url is not None and not args.public_url.startswith(("http://", "https://")):
        raise CliError(f"--public-url must start with http:// or https://, not {args.public_url!r}")
    if args.public_url is not None and not tokens:
        from urllib.parse import urlsplit

        if not web.is_loopback(urlsplit(args.public_url).hostname or ""):
            raise CliError(
                f"--public-url {args.public_url}: a proxy makes the console reachable from other "
                f"machines: give web users tokens with --token-file PATH or ${TOKENS_ENV}"
            )
    if args.config is not None and not Path(args.config).is_file():
        raise CliError(f"--config {args.config}: no such file")
    try:
        web.check_listen(args.host, args.port)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if isinstance(exc, socket.gaierror):
            reason = f"the host does not resolve ({reason})"
        raise CliError(
            f"cannot listen on --host {args.host} --port {args.port}: {reason}"
        ) from None
    dsn, schema = dsn_of(args), schema_of(args)
    with connect(dsn) as conn:  # one clear line now rather than a dead page per session
        check_schema(conn, schema)
    # Each session's console inherits this process's environment (textual-serve copies it).
    _session_dsn(dsn)
    os.environ["JOBTUI_SCHEMA"] = schema
    os.environ.pop(TOKENS_ENV, None)  # the sessions need no secrets of the web server
    mode = "read-write, audited as web:NAME" if args.allow_writes else "read-only"
    who = ", ".join(t.name for t in tokens) if tokens else "no token (this machine only)"
    url = args.public_url or f"http://{_url_host(args.host)}:{args.port}/"
    server = web.ConsoleServer(
        lambda user: session_command(args, user),
        host=args.host,
        port=args.port,
        tokens=tokens,
        public_url=args.public_url,
        max_sessions=args.max_sessions,
        banner=f"jobtui serve: {url} ({mode}; web users: {who}); Ctrl+C stops",
    )
    server.serve()
    return 0


def _session_dsn(dsn: str) -> None:
    """Give the sessions `dsn` in their environment, its password apart in $PGPASSWORD (libpq
    reads it there): no string in a console then holds the password, and a console's crash
    report, which Textual prints with each frame's locals into serve's output, cannot show it."""
    from psycopg import conninfo

    params = conninfo.conninfo_to_dict(dsn) if dsn else {}
    password = params.pop("password", None)
    if password is not None:
        os.environ["PGPASSWORD"] = str(password)
        os.environ.pop("DATABASE_URL", None)  # JOBTUI_DSN, without it, comes first anyway
        dsn = conninfo.make_conninfo("", **params)
    if dsn:
        os.environ["JOBTUI_DSN"] = dsn


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
