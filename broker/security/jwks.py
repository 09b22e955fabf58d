"""The keys that verify OAUTHBEARER tokens, from a JWKS file or URL, kept as Kafka's broker keeps them
(JwksFileVerificationKeyResolver, RefreshingHttpsJwks, RefreshingHttpsJwksVerificationKeyResolver).

- ``file:`` URL (:class:`JwksFile`): the file is read at start (:func:`read_jwks_file`); a file that is
  missing, a directory, unreadable or not a JWKS stops the start. As Kafka 4.4's CachedFile does, it is read
  again when a token is validated and its modification time has changed since, so that keys rotated in the
  file are taken up without a restart; a file that then cannot be read or parsed refuses the token (and is
  tried again with the next one).
- ``http:`` / ``https:`` URL (:class:`RefreshingJwks`): fetched at start (a failure stops the start), then
  again every ``sasl.oauthbearer.jwks.endpoint.refresh.ms`` by a task of the broker's. Every fetch runs in a
  worker thread, never on the event loop, and is a GET as jose4j makes it (tried four times, a body of at
  most 512 KiB: :func:`http_get`); validation only ever reads the keys in hand. A refresh that fails
  is tried again after ``...retry.backoff.ms``, doubling, for at most ``...retry.backoff.max.ms`` in all;
  after that the keys in hand stay and the next scheduled refresh tries again.
- A token naming a ``kid`` that no key has is refused, and asks for a refresh at once (an expedited
  refresh) unless the same ``kid`` asked for one in the last minute; 16 such ``kid``\\ s are remembered,
  a ``kid`` longer than 1000 characters asks for nothing. A ``kid`` the next keys have is forgotten.

Both give the validator (``trafka.broker.security.sasl.oidc``) the ``VerificationKeys`` it reads.
"""
from __future__ import annotations

import logging
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import trio

from trafka.broker.security.sasl.oidc import InvalidToken, Jwk, JwksError, parse_jwks

log = logging.getLogger(__name__)

JWKS_ENDPOINT_URL = "sasl.oauthbearer.jwks.endpoint.url"
MISSING_KEY_ID_CACHE_MAX_ENTRIES = 16
MISSING_KEY_ID_CACHE_IN_FLIGHT_MS = 60_000
MISSING_KEY_ID_MAX_KEY_LENGTH = 1000
#: How long connecting, and then reading, may take in one HTTP fetch of the JWKS (jose4j's).
FETCH_TIMEOUT_S = 20.0
#: jose4j's retries of a failed GET, the first wait (doubling), and the largest body taken.
HTTP_RETRIES = 3
HTTP_FIRST_RETRY_WAIT_S = 0.18
HTTP_BODY_LIMIT = 512 * 1024


class JwksUnavailable(Exception):
    """The JWKS could not be read or fetched (the message says why)."""


def file_path(url: str) -> Path:
    """The file a ``file:`` URL names."""
    parsed = urllib.parse.urlparse(url)
    return Path(urllib.request.url2pathname(parsed.path)).absolute()


class JwksFile:
    """The keys of a JWKS file, read again whenever its modification time changes (see the module's
    docstring)."""

    def __init__(self, path: Path, location: str) -> None:
        self.path = path
        self.location = location
        self._modified_ns: int | None = None
        self._keys: tuple[Jwk, ...] = ()

    def load(self) -> None:
        """Read the file (JwksUnavailable if it cannot be read or is not a JWKS)."""
        try:
            modified_ns = self.path.stat().st_mtime_ns
            keys = parse_jwks(self.path.read_bytes())
        except (OSError, JwksError) as exc:
            raise JwksUnavailable(f"the JWKS file {self.path} cannot be read: {exc}") from None
        self._keys, self._modified_ns = keys, modified_ns
        log.info("JWKS file %s: %d keys", self.path, len(keys))

    def keys(self) -> Sequence[Jwk]:
        try:
            modified_ns = self.path.stat().st_mtime_ns
        except OSError as exc:
            raise InvalidToken(f"Could not validate the access token: the JWKS file {self.path} cannot be read: "
                               f"{exc.strerror or exc}") from None
        if modified_ns != self._modified_ns:
            try:
                self.load()
            except JwksUnavailable as exc:
                raise InvalidToken(f"Could not validate the access token: {exc}") from None
        return self._keys

    def key_missing(self, kid: str | None) -> None:
        return None


def read_jwks_file(url: str) -> JwksFile:
    """The keys of the JWKS file at the ``file:`` ``url``, read now, with Kafka's reasons for a file it cannot
    use (JwksUnavailable)."""
    path = file_path(url)
    if not path.exists():
        raise JwksUnavailable(f"The OAuth configuration option {JWKS_ENDPOINT_URL} contains a file ({path}) that "
                              "doesn't exist")
    if not os.access(path, os.R_OK):
        raise JwksUnavailable(f"The OAuth configuration option {JWKS_ENDPOINT_URL} contains a file ({path}) that "
                              "doesn't have read permission")
    if path.is_dir():
        raise JwksUnavailable(f"The OAuth configuration option {JWKS_ENDPOINT_URL} references a directory ({path}), "
                              "not a file")
    keys = JwksFile(path, url)
    keys.load()
    return keys


def http_get(url: str) -> bytes:
    """The body of a 200 answer to GET ``url``, as jose4j's HttpsJwks gets it: a failed attempt (no answer, or
    not 200) is tried again three times, 180 ms later, then twice and four times that; a body over 512 KiB is
    refused. Blocking: run it in a thread."""
    for attempt in range(HTTP_RETRIES + 1):
        try:
            return _get_once(url)
        except JwksUnavailable:
            if attempt == HTTP_RETRIES:
                raise
            time.sleep(min(HTTP_FIRST_RETRY_WAIT_S * 2 ** attempt, 8.0))
    raise AssertionError("unreachable")


def _get_once(url: str) -> bytes:
    request = urllib.request.Request(url, headers={"Accept": "application/json", "Cache-Control": "no-cache"})
    try:
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S) as response:
            body = response.read(HTTP_BODY_LIMIT + 1)
    except urllib.error.HTTPError as exc:
        raise JwksUnavailable(f"Non 200 status code ({exc.code} {exc.reason}) returned from {url}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise JwksUnavailable(f"GET {url} failed: {getattr(exc, 'reason', exc)}") from None
    if len(body) > HTTP_BODY_LIMIT:
        raise JwksUnavailable(f"the answer from {url} is over {HTTP_BODY_LIMIT} bytes")
    return body


async def http_get_in_thread(url: str) -> bytes:
    """:func:`http_get` in a worker thread: the event loop goes on serving meanwhile."""
    return await trio.to_thread.run_sync(http_get, url, abandon_on_cancel=True)


class RefreshingJwks:
    """The keys of a JWKS URL, refreshed in the background (see the module's docstring)."""

    def __init__(self, url: str, *, refresh_ms: int = 3_600_000, retry_backoff_ms: int = 100,
                 retry_backoff_max_ms: int = 10_000, fetch: Callable[[str], Awaitable[bytes]] = http_get_in_thread,
                 clock_ms: Callable[[], int] = lambda: time.monotonic_ns() // 1_000_000) -> None:
        self.url = url
        self.refresh_ms = refresh_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self._fetch = fetch
        self._clock_ms = clock_ms
        self._keys: tuple[Jwk, ...] = ()
        self._missing: OrderedDict[str, int] = OrderedDict()
        self._expedite_requested = False
        self._wakeup: trio.Event | None = None
        #: Completed refreshes (scheduled or expedited), for tests and metrics.
        self.refreshes = 0

    # -- what the validator reads (on the event loop, never blocking) --------------------------------------------

    def keys(self) -> Sequence[Jwk]:
        return self._keys

    def key_missing(self, kid: str | None) -> None:
        """A token named ``kid`` and no key fits: ask for a refresh now, at most once a minute per ``kid``."""
        if kid is None:
            return
        if len(kid) > MISSING_KEY_ID_MAX_KEY_LENGTH:
            log.warning("Key ID %s (trimmed to first %d characters out of %d total) was too long to cache",
                        kid[:MISSING_KEY_ID_MAX_KEY_LENGTH], MISSING_KEY_ID_MAX_KEY_LENGTH, len(kid))
            return
        now = self._clock_ms()
        next_check = self._missing.get(kid)
        if next_check is not None and next_check > now:
            self._missing.move_to_end(kid)
            return
        self._missing[kid] = now + MISSING_KEY_ID_CACHE_IN_FLIGHT_MS
        self._missing.move_to_end(kid)
        while len(self._missing) > MISSING_KEY_ID_CACHE_MAX_ENTRIES:
            self._missing.popitem(last=False)
        log.info("refreshing the JWKS of %s at once: no key for kid %r", self.url, kid)
        self._expedite_requested = True
        if self._wakeup is not None:
            self._wakeup.set()

    # -- the broker's side ------------------------------------------------------------------------------------------

    def install(self, document: bytes | str) -> None:
        """Keys fetched: they replace the ones in hand, and their kids are no longer missing."""
        keys = parse_jwks(document)
        for key in keys:
            if key.kid is not None:
                self._missing.pop(key.kid, None)
        self._keys = keys

    async def fetch_once(self) -> None:
        """One fetch (in a worker thread); JwksUnavailable when it fails."""
        body = await self._fetch(self.url)
        try:
            self.install(body)
        except JwksError as exc:
            raise JwksUnavailable(f"the JWKS at {self.url} cannot be read: {exc}") from None

    async def load(self) -> None:
        """The fetch at start; JwksUnavailable (which stops the start) when it fails."""
        await self.fetch_once()
        log.info("JWKS of %s: %d keys; refreshed every %d ms", self.url, len(self._keys), self.refresh_ms)

    async def refresh(self) -> bool:
        """A refresh with Kafka's retries; whether it got new keys (the old stay otherwise)."""
        end = self._clock_ms() + self.retry_backoff_max_ms
        attempt = 0
        while self._clock_ms() <= end:
            attempt += 1
            try:
                await self.fetch_once()
            except JwksUnavailable as exc:
                wait = min(self.retry_backoff_ms * 2 ** (attempt - 1), end - self._clock_ms())
                if wait <= 0:
                    log.warning("OAuth JWKS refresh of %s encountered an error; not updating local JWKS cache: %s",
                                self.url, exc)
                    return False
                log.warning("Attempt %d to refresh the JWKS of %s failed (%s); retrying in %d ms",
                            attempt, self.url, exc, wait)
                await trio.sleep(wait / 1000)
                continue
            self.refreshes += 1
            log.info("OAuth JWKS refresh of %s complete: %d keys", self.url, len(self._keys))
            return True
        return False

    async def run(self) -> None:
        """Refresh every refresh_ms, and at once when a token asked for a missing kid, until cancelled."""
        self._wakeup = trio.Event()
        next_scheduled = self._clock_ms() + self.refresh_ms
        while True:
            if not self._expedite_requested:
                with trio.move_on_after(max(0, next_scheduled - self._clock_ms()) / 1000):
                    await self._wakeup.wait()
            self._wakeup = trio.Event()
            self._expedite_requested = False
            now = self._clock_ms()
            while next_scheduled <= now:
                next_scheduled += self.refresh_ms
            await self.refresh()
