"""The console in a browser (`jobtui serve`): textual-serve's web server with jobtui's gate.

textual-serve runs one command per browser session (here `python -m jobtui console …`, see
`session_command`) and relays its screen and keys over a websocket. This module adds what a
shared console needs in front of it:

- **Tokens.** Each token has a name and a secret (`name:secret` lines; see `parse_tokens`). A
  request without a known token gets HTTP 401 and no console: neither the page nor the
  websocket upgrade. `/?token=SECRET` signs in: the answer is a redirect to the same page
  without the secret, setting an HttpOnly, SameSite=Strict cookie that names a server-side
  session (the secret itself is not kept in the browser). `Authorization: Bearer SECRET` works
  too, for a reverse proxy or a script. Without tokens (loopback only; the CLI enforces it)
  everyone who reaches the port is `local`.
- **Identity.** The token's name is the web user: the session's console is started with it and
  audits its writes as `web:<name>`.
- **One origin.** A websocket opened from another site's page is refused (403), so a page
  elsewhere cannot drive the console with the operator's cookie.
- **This machine's names only, without tokens.** A token-less server answers only requests
  addressed to a loopback name (`localhost`, 127.0.0.1, [::1]) or to --public-url's host: a
  site whose name is made to resolve to 127.0.0.1 (DNS rebinding) is same-origin with itself,
  so only the Host header tells its page from the operator's.
- **No frames.** Every answer forbids other sites to frame it (X-Frame-Options, CSP
  frame-ancestors): a page over the console could make the operator type into it.
- **A cap on sessions.** Each session is a console process with its own database connection.

Nothing secret reaches the browser: the page holds the websocket's address only, and each
session's DSN travels in the console process's environment, never on a command line.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import re
import secrets
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp_jinja2
from aiohttp import WSCloseCode, WSMsgType, web
from textual_serve.app_service import AppService
from textual_serve.server import Server

COOKIE = "jobtui_session"
LOCAL_USER = "local"  # the web user when no tokens are required (loopback only)
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}\Z")
MIN_SECRET = 16
MAX_SIGN_INS = 1000  # sessions remembered; the oldest are forgotten first

log = logging.getLogger("jobtui.web")


class TokenError(ValueError):
    """A token list that cannot be used (bad line, short secret, duplicate)."""


@dataclass(frozen=True)
class Token:
    name: str
    secret: str

    def __repr__(self) -> str:  # never print a secret, even in a debugger
        return f"Token({self.name!r})"


def parse_tokens(text: str, where: str) -> tuple[Token, ...]:
    """`name:secret` entries, one a line (or comma-separated); `#` starts a comment line.

    Names are letters, digits and `_ . @ -` (up to 64); secrets have no spaces and at least
    16 characters. A name or a secret given twice is refused."""
    tokens: list[Token] = []
    entries = [
        (n, part.strip())
        for n, line in enumerate(text.splitlines(), 1)
        if not line.strip().startswith("#")
        for part in line.split(",")
        if part.strip()
    ]
    for n, entry in entries:
        at = f"{where}, line {n}"
        name, sep, secret = entry.partition(":")
        name, secret = name.strip(), secret.strip()
        if not sep or not name or not secret:
            raise TokenError(f"{at}: expected NAME:SECRET")
        if not NAME.match(name):
            raise TokenError(
                f"{at}: token name {name[:64]!r} may have only letters, digits and _ . @ - "
                "(up to 64)"
            )
        if len(secret) < MIN_SECRET or any(c.isspace() for c in secret):
            raise TokenError(
                f"{at}: the secret of {name!r} must be at least {MIN_SECRET} characters, "
                "without spaces (e.g. `openssl rand -hex 24`)"
            )
        if any(t.name == name for t in tokens):
            raise TokenError(f"{at}: token name {name!r} is given twice")
        if any(t.secret == secret for t in tokens):
            raise TokenError(f"{at}: the secret of {name!r} is another token's too")
        tokens.append(Token(name, secret))
    if not tokens:
        raise TokenError(f"{where}: no tokens (expected NAME:SECRET lines)")
    return tuple(tokens)


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server on this machine."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def check_listen(host: str, port: int) -> None:
    """Raise OSError unless `host:port` can be listened on (bound and let go at once, as
    aiohttp binds: SO_REUSEADDR). The banner with the URL is printed before aiohttp binds, so
    a port in use or a host that does not resolve printed a URL, then failed."""
    for family, kind, proto, _, address in socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    ):
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:  # IPv6 only, as asyncio binds it: dual-stack, `::`
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)  # was refused
                # when another process listened on 0.0.0.0 with the port, where aiohttp serves
            probe.bind(address)


class ConsoleServer(Server):
    """textual-serve's `Server` behind tokens, one console process per browser session."""

    def __init__(
        self,
        session_command: Callable[[str], str],
        *,
        host: str,
        port: int,
        tokens: tuple[Token, ...] = (),
        public_url: str | None = None,
        max_sessions: int = 10,
        title: str = "jobtui",
        banner: str = "",
    ) -> None:
        super().__init__("jobtui console", host=host, port=port, title=title)
        self.session_command = session_command
        self.tokens = tokens
        self.given_public_url = public_url.rstrip("/") if public_url else None
        self.max_sessions = max_sessions
        self.banner = banner
        self.sessions = 0
        self._open: set[web.WebSocketResponse] = set()
        self._signed_in: dict[str, str] = {}  # cookie value -> token name

    # --- the gate ------------------------------------------------------------------------

    def _token(self, secret: str) -> Token | None:
        found = None
        # aiohttp decodes a header's bytes that are not UTF-8 as surrogates: keep them bytes
        given = secret.encode("utf-8", "surrogateescape")
        for token in self.tokens:  # compare with every token: the time does not tell which
            if hmac.compare_digest(token.secret.encode(), given):
                found = token
        return found

    def user_of(self, request: web.Request) -> str | None:
        """The web user a request is from, or None when it shows no valid token."""
        if not self.tokens:
            return LOCAL_USER
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer" and (token := self._token(value.strip())) is not None:
            return token.name
        return self._signed_in.get(request.cookies.get(COOKIE, ""))

    def _sign_in(self, request: web.Request, secret: str) -> web.StreamResponse:
        token = self._token(secret)
        if token is None:
            return _refused("the token is not valid")
        session = secrets.token_urlsafe(32)
        self._signed_in[session] = token.name
        while len(self._signed_in) > MAX_SIGN_INS:
            self._signed_in.pop(next(iter(self._signed_in)))
        query = request.rel_url.query.copy()
        del query["token"]
        # the same page without the secret; "//host" would leave this site, "/host" does not
        here = request.rel_url.with_path("/" + request.path.lstrip("/")).with_query(query)
        answer = web.HTTPSeeOther(str(here))
        answer.set_cookie(
            COOKIE,
            session,
            httponly=True,
            samesite="Strict",
            secure=self._public_url(request).startswith("https:"),
            path="/",
        )
        log.info("web user %s signed in from %s", token.name, request.remote)
        return answer

    @web.middleware
    async def gate(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.path.startswith("/static/"):  # textual-serve's own scripts and fonts
            return await handler(request)
        if not self._host_allowed(request):
            return web.Response(
                status=403,
                text="jobtui serve: without tokens this console answers only to localhost, "
                "127.0.0.1 or [::1] (or --public-url)\n",
            )
        if self.tokens and "token" in request.query:
            return self._sign_in(request, request.query["token"])
        user = self.user_of(request)
        if user is None:
            return _refused("this console needs a token: open it as /?token=SECRET")
        request["web_user"] = user
        return await handler(request)

    def _host_allowed(self, request: web.Request) -> bool:
        """With tokens, any name reaching the server may ask (the token decides). Without, the
        request must be addressed to this machine by a loopback name or to --public-url."""
        if self.tokens:
            return True
        name = urlsplit(f"//{request.host}").hostname or ""
        if self.given_public_url and name == urlsplit(self.given_public_url).hostname:
            return True
        return is_loopback(name)

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self.gate)
        app.on_response_prepare.append(_not_framed)
        return app

    # --- pages and sessions --------------------------------------------------------------

    def _public_url(self, request: web.Request) -> str:
        """The address the browser reached (a reverse proxy's when --public-url says so)."""
        return self.given_public_url or f"{request.scheme}://{request.host}"

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        base = self._public_url(request)
        ws = ("wss:" if base.startswith("https:") else "ws:") + base.split(":", 1)[1]
        font_size = _whole(request.query.get("fontsize", ""), 16, 6, 48)
        context: dict[str, Any] = {
            "font_size": font_size,
            "app_websocket_url": f"{ws}/ws",
            "config": {"static": {"url": f"{base}/static/"}},
            "application": {"name": self.title},
        }
        return aiohttp_jinja2.render_template("app_index.html", request, context)

    def _same_origin(self, request: web.Request) -> bool:
        origin = request.headers.get("Origin")
        if origin is None:  # not a browser: the token already decided
            return True
        allowed = {request.host, urlsplit(self._public_url(request)).netloc}
        return urlsplit(origin).netloc in allowed

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        if not self._same_origin(request):
            raise web.HTTPForbidden(text="jobtui serve: a console opened from another site\n")
        if self.sessions >= self.max_sessions:
            raise web.HTTPServiceUnavailable(
                text=f"jobtui serve: {self.max_sessions} sessions are open (--max-sessions)\n"
            )
        user: str = request["web_user"]
        websocket = web.WebSocketResponse(heartbeat=15)
        width = _whole(request.query.get("width", ""), 80, 20, 500)
        height = _whole(request.query.get("height", ""), 24, 5, 300)
        await websocket.prepare(request)
        self._open.add(websocket)
        self.sessions += 1
        log.info("console session for %s (%d open)", user, self.sessions)
        service = AppService(
            self.session_command(user),
            write_bytes=websocket.send_bytes,
            write_str=websocket.send_str,
            close=_closer(websocket),
            download_manager=self.download_manager,
        )
        try:
            await service.start(width, height)
            async for message in websocket:
                if message.type == WSMsgType.TEXT:
                    await _relay(service, websocket, message.data)
        finally:
            await service.stop()
            self._open.discard(websocket)
            self.sessions -= 1
            log.info("console session for %s ended", user)
        return websocket

    # --- what textual-serve prints -------------------------------------------------------

    def initialize_logging(self) -> None:
        # Plain lines: textual-serve's own handler prints tracebacks with their locals.
        logging.basicConfig(level=logging.INFO, format="jobtui serve: %(message)s")
        # aiohttp's access log would print every URL, `/?token=SECRET` included.
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)

    async def on_startup(self, app: web.Application) -> None:
        print(self.banner, flush=True)

    async def on_shutdown(self, app: web.Application) -> None:
        """Ctrl+C or SIGTERM: close every session, so each console quits now (aiohttp would
        otherwise wait for the browsers to leave)."""
        for websocket in list(self._open):
            await websocket.close(code=WSCloseCode.GOING_AWAY, message=b"jobtui serve stopped")


async def _not_framed(request: web.Request, response: web.StreamResponse) -> None:
    """No other site may show the console in a frame: a page over it could trick the operator
    into typing keys (clickjacking; a token-less console needs no cookie to be framed). And no
    cache keeps the page: it is built from the request's Host and shown to signed-in users."""
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Content-Security-Policy"] = "frame-ancestors 'none'"
    if not request.path.startswith("/static/"):
        response.headers["Cache-Control"] = "no-store"


def _closer(websocket: web.WebSocketResponse) -> Callable[[], Awaitable[None]]:
    async def close() -> None:
        await websocket.close()

    return close


def _refused(why: str) -> web.StreamResponse:
    return web.Response(
        status=401,
        text=f"jobtui serve: {why}\n",
        headers={"WWW-Authenticate": 'Bearer realm="jobtui"'},
    )


async def _relay(service: AppService, websocket: web.WebSocketResponse, data: str) -> None:
    """One message from the browser: keys, a resize, a ping, focus."""
    try:
        envelope = json.loads(data)
    except ValueError:
        return
    if not isinstance(envelope, list) or not envelope:
        return
    kind, body = envelope[0], (envelope[1] if len(envelope) > 1 else None)
    if kind == "stdin" and isinstance(body, str):
        # JSON may hold a lone surrogate ("\ud800"), which UTF-8 cannot: it becomes "?"
        await service.send_bytes(body.encode("utf-8", "replace"))
    elif kind == "resize" and isinstance(body, dict):
        width = _whole(str(body.get("width", "")), 80, 20, 500)
        height = _whole(str(body.get("height", "")), 24, 5, 300)
        await service.set_terminal_size(width, height)
    elif kind == "ping":
        await websocket.send_json(["pong", body])
    elif kind == "blur":
        await service.blur()
    elif kind == "focus":
        await service.focus()


def _whole(text: str, default: int, low: int, high: int) -> int:
    try:
        return min(high, max(low, int(text)))
    except ValueError:
        return default
