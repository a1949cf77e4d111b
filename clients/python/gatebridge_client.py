"""A Python client for ``gatebridge serve`` (``--stdio`` or ``--listen``).

One file, standard library only, Python >= 3.9. Install it with
``pip install ./clients/python`` from the gatebridge repository (offline:
the build backend is in the tree), or copy it into your project.

gatebridge runs untrusted shell commands in a sandbox (bubblewrap, Docker,
or a plain process) and puts *gates* on the sandbox's ``PATH``: commands
that call back to the host. With this client a Python agent runtime opens
sandboxes, runs commands in them (with streamed output, stdin, signals and
timeouts) and answers gates itself, in-process::

    from gatebridge_client import Client

    with Client(on_approval=lambda req: "allow") as client:

        @client.gate("lookup", summary="Look a word up", usage="lookup WORD")
        def lookup(call):
            return "definition of " + " ".join(call.args) + "\\n"

        with client.open_sandbox(backend="bwrap", workspace="/path/to/repo") as sb:
            r = sb.run("lookup sandbox; ls | wc -l")
            print(r.exit_code, r.stdout.decode())
            exit_code, stdout, stderr = r          # unpacks like a tuple

            p = sb.start(["cat"], on_output=lambda stream, data: print(stream, data))
            p.write(b"hello\\n")
            p.close_stdin()
            print(p.wait().exit_code)

``Client()`` starts ``gatebridge serve --stdio`` as a child process. To
reach a server started with ``gatebridge serve --listen ADDR --token-file
FILE`` (another machine, or a sidecar container), use
``Client.connect_tcp(host, port, token=..., tls=...)``.

Threads. A background thread reads the server's messages, except while
a thread waits, without a timeout, for a response or for the exit of a
process without ``on_output``: that thread reads them itself until its
own has come (one thread at a time reads, in order), which saves waking
another thread per command. Responses are delivered by the thread that
reads them; ``process/output`` and ``process/exited`` notifications of a
process started with ``on_output`` are delivered, in order, on a second
"events" thread, which runs the callbacks (those of a process without one
are kept by the reading thread itself); gate functions and the approval callback run in a
pool of worker threads, so a slow gate blocks neither output nor other
gates. Any of them may call the client (run a command, write to a
process), except that an ``on_output`` callback must not wait for a
process to exit (the exit is delivered on the thread it would block).

Commands. A str is a shell command line, run by POSIX sh
(``["sh", "-c", command]``: every backend's image has sh, not always
bash); a list is an argv, passed as is. Output is kept in memory (the
client reads the server as fast as it writes), so :meth:`Sandbox.run`
returns all of it, byte for byte.

Times are in seconds (floats), as everywhere in Python and in the
TypeScript client: ``run(..., timeout=30)``, ``Process.read(wait=1)``;
the protocol's milliseconds show only in ``client.limits`` and
``server_info``. The old names in milliseconds (``timeout_ms=``,
``wait_ms=``) still work for this release and warn
(``DeprecationWarning``).

Errors. An error response from the server raises :class:`GatebridgeError`
(``code``, ``message``, ``data``). When the server goes away, every
pending call and every :meth:`Process.wait` raises
:class:`ConnectionClosedError` (a ``GatebridgeError``) instead of hanging.

The protocol is described in the gatebridge repository (docs/ and
bridge/rpc/types.go).
"""

from __future__ import annotations

import base64
import collections
import io
import itertools
import json
import logging
import math
import os
import queue
import signal as _signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import (
    IO,
    Any,
    Callable,
    Dict,
    Iterator,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
    overload,
)

__all__ = [
    "Client",
    "Sandbox",
    "SandboxFS",
    "FileInfo",
    "Process",
    "RunResult",
    "GateCallReport",
    "ReadResult",
    "Chunk",
    "Snapshot",
    "GateCall",
    "GateResult",
    "ApprovalRequest",
    "ApprovalAnswer",
    "Grant",
    "GatebridgeError",
    "ConnectionClosedError",
    "ParseError",
    "InvalidRequestError",
    "MethodNotFoundError",
    "InvalidParamsError",
    "InternalError",
    "NotFoundError",
    "NotInitializedError",
    "LimitError",
    "UnavailableError",
    "ConflictError",
    "UnauthorizedError",
    "PolicyDeniedError",
    "RequestCancelledError",
    "LineTooLongError",
    "error_for",
    "PROTOCOL_VERSION",
    "DEFAULT_MAX_LINE_BYTES",
]

__version__ = "0.1.0"

#: The protocol version this client speaks.
PROTOCOL_VERSION = 1

#: The longest line (one JSON-RPC message) the client takes from the
#: server by default: the server's own cap on a message
#: (``limits["maxMessageBytes"]``, 16 MiB). A longer line closes the
#: connection, so a hostile server cannot make the client hold more.
DEFAULT_MAX_LINE_BYTES = 16 << 20

# JSON-RPC and gatebridge error codes (bridge/rpc/types.go).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
NOT_FOUND = -32001
NOT_INITIALIZED = -32002
LIMIT = -32003
UNAVAILABLE = -32004
CONFLICT = -32005
#: ``serve --listen`` refused the connection: no initialize with the
#: server's token as the first message.
UNAUTHORIZED = -32006
#: ``process/start`` refused by the command policy (``policy.commands``)
#: before anything started; ``data`` names the command and the rule.
POLICY_DENIED = -32007
REQUEST_CANCELLED = -32800
#: Client-side only: the connection to the server is gone.
CONNECTION_CLOSED = -32099
#: The code of the error response this client sends when a gate function
#: raises (the caller in the sandbox sees exit 1 and the message).
GATE_FAILED = -32000

log = logging.getLogger("gatebridge_client")

Data = Union[bytes, bytearray, memoryview, str]
Command = Union[str, Sequence[str]]
OutputCallback = Callable[[str, bytes], None]
GateFunction = Callable[["GateCall"], Any]
ApprovalDecision = Union[str, bool, Tuple[str, str], "Grant", "ApprovalAnswer"]
ApprovalCallback = Callable[["ApprovalRequest"], ApprovalDecision]
F = TypeVar("F", bound=Callable[..., Any])

_DECISIONS = ("allow", "deny", "allowForSession")
_SIGNALS = ("INT", "TERM", "KILL", "HUP")
# Raw bytes per process/write message (base64 grows it by 4/3; the
# server's message cap is 16 MiB by default).
_WRITE_CHUNK = 1 << 20


class GatebridgeError(Exception):
    """An error response from the server (or, with code
    :data:`CONNECTION_CLOSED`, a lost connection)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(code, message, data)
        self.code = code
        self.message = message
        self.data = data

    @property
    def hint(self) -> Optional[str]:
        """``data["hint"]``, when the server gave one."""
        h = self.data.get("hint") if isinstance(self.data, dict) else None
        return h if isinstance(h, str) and h else None

    def __str__(self) -> str:
        s = "%s (code %d)" % (self.message, self.code)
        if self.hint:
            s += "; hint: %s" % self.hint
        return s


class ConnectionClosedError(GatebridgeError):
    """The connection to the server is gone: it exited, or the client was
    closed."""

    code = CONNECTION_CLOSED

    def __init__(self, message: str, data: Any = None) -> None:
        super().__init__(CONNECTION_CLOSED, message, data)


class _CodedError(GatebridgeError):
    code: int

    def __init__(self, message: str, data: Any = None) -> None:
        super().__init__(type(self).code, message, data)


class ParseError(_CodedError):
    code = PARSE_ERROR


class InvalidRequestError(_CodedError):
    code = INVALID_REQUEST


class MethodNotFoundError(_CodedError):
    code = METHOD_NOT_FOUND


class InvalidParamsError(_CodedError):
    code = INVALID_PARAMS


class InternalError(_CodedError):
    code = INTERNAL_ERROR


class NotFoundError(_CodedError):
    """No such sandbox, process or gate."""

    code = NOT_FOUND


class NotInitializedError(_CodedError):
    code = NOT_INITIALIZED


class LimitError(_CodedError):
    """A cap of the connection (``client.limits``) was reached."""

    code = LIMIT


class UnavailableError(_CodedError):
    """The backend cannot run here (``data["hint"]`` says why)."""

    code = UNAVAILABLE


class ConflictError(_CodedError):
    """The id or name is in use."""

    code = CONFLICT


class UnauthorizedError(_CodedError):
    """``serve --listen`` refused the connection (a wrong token)."""

    code = UNAUTHORIZED


class PolicyDeniedError(_CodedError):
    """The command policy refused the command before it started (``data``:
    ``kind`` ``policy_denied``, ``decision``, ``rule``, ``command``)."""

    code = POLICY_DENIED


class RequestCancelledError(_CodedError):
    code = REQUEST_CANCELLED


_ERRORS: Dict[int, Any] = {c.code: c for c in (
    ParseError, InvalidRequestError, MethodNotFoundError, InvalidParamsError, InternalError, NotFoundError,
    NotInitializedError, LimitError, UnavailableError, ConflictError, UnauthorizedError, PolicyDeniedError,
    RequestCancelledError, ConnectionClosedError)}


def error_for(code: int, message: str, data: Any = None) -> GatebridgeError:
    """The error of a code: its class (``NotFoundError``, ...), or a
    plain :class:`GatebridgeError` for a code without one. Every class is a
    ``GatebridgeError`` with ``code``, ``message``, ``data`` and ``hint``."""
    cls = _ERRORS.get(code)
    return cls(message, data) if cls is not None else GatebridgeError(code, message, data)


def _fresh(err: GatebridgeError) -> GatebridgeError:
    """A new instance of a shared lost-connection error, so that threads
    raising it do not share one traceback."""
    return ConnectionClosedError(err.message) if isinstance(err, ConnectionClosedError) else err


def _b64(data: Data) -> str:
    return base64.b64encode(_to_bytes(data)).decode("ascii")


def _unb64(s: Optional[str]) -> bytes:
    return base64.b64decode(s) if s else b""


def _exact(s: Any, b64: Any) -> str:
    """The exact string a field and its base64 sibling carry (docs/json.md,
    "Bytes that are not UTF-8"): bytes that are not UTF-8 become lone
    surrogates (``surrogateescape``, as Python decodes ``sys.argv``), so
    ``_raw`` gives the bytes back."""
    if b64 is None:
        return str(s if s is not None else "")
    return base64.b64decode(b64).decode("utf-8", "surrogateescape")


def _exact_list(ss: Any, b64s: Any) -> List[str]:
    """:func:`_exact` for a list field and its sibling list (``null`` for
    the elements that are valid UTF-8; no sibling when all are)."""
    ss = list(ss or [])
    if not b64s:
        return [str(s) for s in ss]
    if len(b64s) != len(ss):
        raise ValueError("%d arguments but %d entries in argsBase64" % (len(ss), len(b64s)))
    return [_exact(s, b) for s, b in zip(ss, b64s)]


def _gate_calls(exit: Mapping[str, Any]) -> Tuple[List["GateCallReport"], int]:
    """The gate-call reports of a ``process/exited``, and how many more
    were dropped."""
    calls = exit.get("gateCalls")
    out = [r for r in map(GateCallReport._parse, calls) if r is not None] if isinstance(calls, list) else []
    try:
        dropped = int(exit.get("gateCallsDropped", 0) or 0)
    except (ValueError, TypeError):
        dropped = 0
    return out, dropped


def _raw(s: str) -> bytes:
    """The bytes of a string from :func:`_exact`."""
    return s.encode("utf-8", "surrogateescape")


def _to_bytes(data: Optional[Data]) -> bytes:
    if data is None:
        return b""
    if isinstance(data, str):
        # surrogateescape: a str made from bytes that are not UTF-8 (a
        # gate's args) turns back into those bytes, so a gate that echoes
        # an argument answers it exactly.
        return data.encode("utf-8", "surrogateescape")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError("want bytes or str, got %s" % type(data).__name__)


def _argv(command: Command) -> List[str]:
    """A str is a shell command line, run as ``["sh", "-c", command]``
    (POSIX sh: present in every backend's image, bash may not be); a
    sequence is an argv."""
    if isinstance(command, str):
        return ["sh", "-c", command]
    argv = [str(a) if not isinstance(a, str) else a for a in command]
    if not argv:
        raise ValueError("empty command")
    return argv


def _env(env: Optional[Mapping[str, str]]) -> Optional[Dict[str, str]]:
    if env is None:
        return None
    out = {}
    for k, v in env.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError("env must map str to str")
        out[k] = v
    return out


def _signal_name(sig: Union[str, int]) -> str:
    if isinstance(sig, int):
        name = _signal.Signals(sig).name
    else:
        name = sig.upper()
    if name.startswith("SIG"):
        name = name[3:]
    if name not in _SIGNALS:
        raise ValueError("signal %r: use one of %s" % (sig, ", ".join(_SIGNALS)))
    return name


def _ms(seconds: Optional[float], what: str) -> Optional[int]:
    """Seconds (the API's unit) to the protocol's whole milliseconds;
    ``None`` stays ``None`` (the server's default). Any positive time is at
    least 1 ms."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds >= 0 or math.isinf(seconds):
        raise TypeError("%s: want seconds >= 0 (a float), got %r" % (what, seconds))
    return max(1, int(round(seconds * 1000)))


def _deprecated_ms(seconds: Optional[float], name: str, old_ms: Optional[int], old_name: str,
                   stacklevel: int = 3) -> Optional[float]:
    """The time in seconds from ``name`` or, deprecated, from ``old_name``
    in milliseconds (0 there meant the server's default, as before)."""
    if old_ms is None:
        return seconds
    if seconds is not None:
        raise TypeError("pass %s= (seconds) or the deprecated %s= (milliseconds), not both" % (name, old_name))
    warnings.warn("%s= (milliseconds) is deprecated and will be removed: pass %s= in seconds" % (old_name, name),
                  DeprecationWarning, stacklevel=stacklevel)
    if isinstance(old_ms, bool) or not isinstance(old_ms, (int, float)) or not old_ms >= 0:
        raise TypeError("%s: want milliseconds >= 0, got %r" % (old_name, old_ms))
    return old_ms / 1000.0 if old_ms else None


def _old_positional(method: str, names: Sequence[str], values: Sequence[Any], given: Mapping[str, Any]) -> Dict[str, Any]:
    """The deprecated positional arguments of a method whose times became
    keyword-only seconds: their old names, in their old order."""
    if len(values) > len(names):
        raise TypeError("%s takes at most %d deprecated positional arguments after the first ones (%s), got %d"
                        % (method, len(names), ", ".join(names), len(values)))
    out = dict(zip(names, values))
    for k in out:
        if given.get(k) is not None:
            raise TypeError("%s got %s both as a positional and a keyword argument" % (method, k))
    warnings.warn("%s: passing %s by position is deprecated: pass them as keywords (times in seconds: %s)"
                  % (method, ", ".join(list(names)[: len(values)]), "timeout=" if "timeout_ms" in names else "wait="),
                  DeprecationWarning, stacklevel=3)
    return out


def default_binary() -> str:
    """The gatebridge binary :class:`Client` starts by default:
    ``$GATEBRIDGE_BIN``, else ``gatebridge`` from ``PATH``."""
    return os.environ.get("GATEBRIDGE_BIN") or "gatebridge"


# ---------------------------------------------------------------- results


@dataclass
class GateCallReport:
    """One gate call a process's command made, as ``process/exited``'s
    ``gateCalls`` (and ``process/gateCall``) report it, like ``run
    --json``'s ``calls``: the gate, its arguments (exact, as
    :attr:`GateCall.args`; secret values read ``[secret:NAME]``), the
    exit code, the ``decision`` (``ran``, ``denied``, ``rejected``,
    ``timed_out``, ``unknown``, ``canceled``), who decided a gate that
    needed approval (``decided_by``: ``person``, ``runtime``, ``grant``,
    ... or ``None``), its ``duration`` in seconds, and what the gate did
    on the host (``events``, such as an http gate's requests)."""

    call_id: str
    gate: str
    args: List[str]
    exit_code: int
    decision: str
    decided_by: Optional[str] = None
    duration: float = 0.0
    bytes_in: int = 0
    bytes_out: int = 0
    error: Optional[str] = None
    events: List[Dict[str, Any]] = field(default_factory=list)
    events_omitted: int = 0

    @property
    def args_bytes(self) -> List[bytes]:
        """The arguments' exact bytes."""
        return [_raw(a) for a in self.args]

    @classmethod
    def _parse(cls, c: Any) -> Optional["GateCallReport"]:
        """The report of a wire object, or None (logged) for one that is
        malformed: a bad report from the server loses that report only."""
        if not isinstance(c, dict):
            return None
        try:
            return cls._from_wire(c)
        except (ValueError, TypeError) as e:
            log.warning("gatebridge_client: a malformed gate-call report ignored: %s", e)
            return None

    @classmethod
    def _from_wire(cls, c: Mapping[str, Any]) -> "GateCallReport":
        ev = c.get("events")
        return cls(str(c.get("callId", "")), _exact(c.get("gate"), c.get("gateBase64")), _exact_list(c.get("args"), c.get("argsBase64")),
                   int(c.get("exitCode", 0)), str(c.get("decision", "")), c.get("decidedBy") or None,
                   float(c.get("durationMs", 0)) / 1000.0, int(c.get("bytesIn", 0)), int(c.get("bytesOut", 0)),
                   c.get("error") or None, [e for e in ev if isinstance(e, dict)] if isinstance(ev, list) else [],
                   int(c.get("eventsOmitted", 0)))


#: Called with each :class:`GateCallReport` of a process as its call is
#: answered (``Sandbox.start(..., on_gate_call=...)``).
GateCallCallback = Callable[[GateCallReport], None]


@dataclass
class RunResult:
    """How a process ended, and its output.

    Unpacks like a tuple: ``exit_code, stdout, stderr = sandbox.run(...)``.
    ``signal`` names the signal when the exit code is 128+N (e.g. "TERM"),
    ``timed_out`` is true when the process's ``timeout`` stopped it.
    ``answer`` is what the command passed to the ``submit`` gate (the last
    call; else the rest of a ``SUBMIT: answer`` line it printed, unless
    the server's ``bridge.submit_lines`` is off), or ``None``: exact, as
    :attr:`GateCall.args` are (bytes that are not UTF-8 decoded with
    ``surrogateescape``; :attr:`answer_bytes` gives the bytes).
    ``gate_calls`` are the gate calls the command made, in order
    (:class:`GateCallReport`; the server lists the first
    ``limits["maxGateCalls"]``), ``gate_calls_dropped`` how many more.
    """

    exit_code: int
    stdout: bytes
    stderr: bytes
    signal: Optional[str] = None
    timed_out: bool = False
    answer: Optional[str] = None
    gate_calls: List[GateCallReport] = field(default_factory=list)
    gate_calls_dropped: int = 0

    def __iter__(self) -> Iterator[Any]:
        return iter((self.exit_code, self.stdout, self.stderr))

    @property
    def ok(self) -> bool:
        """Whether the process exited 0."""
        return self.exit_code == 0

    @property
    def answer_bytes(self) -> Optional[bytes]:
        """The answer's exact bytes (``None`` without one)."""
        return None if self.answer is None else _raw(self.answer)

    @property
    def stdout_text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")


@dataclass
class Chunk:
    """One piece of a process's output."""

    seq: int
    stream: str  # "stdout" or "stderr"
    data: bytes


@dataclass
class ReadResult:
    """The result of :meth:`Process.read` (``process/read``)."""

    chunks: List[Chunk]
    exited: bool
    exit_code: Optional[int]
    first_seq: int
    next_seq: int


@dataclass
class Snapshot:
    """The retained head and tail of a process's output
    (``process/snapshot``)."""

    stdout: bytes
    stderr: bytes
    truncated: bool
    omitted_bytes: int
    exit_code: Optional[int]
    running: bool


class GateResult(NamedTuple):
    """What a gate function may return: ``GateResult(exit_code, stdout,
    stderr)``; any ``(exit_code, stdout, stderr)`` tuple works the same."""

    exit_code: int = 0
    stdout: Optional[Data] = None
    stderr: Optional[Data] = None


# ---------------------------------------------------------------- gates


class GateCall:
    """One call of a gate from inside a sandbox, as a gate function sees it.

    ``args`` are the arguments after the gate name; ``stdin`` is what the
    caller piped in (``None`` when the gate does not take stdin or nothing
    was sent); ``cwd`` is the caller's working directory as the sandbox
    sees it. Arguments and cwd are exact: bytes that are not UTF-8 are
    decoded with ``surrogateescape``, as Python decodes ``sys.argv`` (the
    byte 0xff arrives as ``"\\udcff"``, 0xfe as ``"\\udcfe"``);
    ``args_bytes`` and ``cwd_bytes`` give the bytes. ``cancelled`` is set
    when the caller went away or the deadline passed (the answer is then
    ignored): a long gate should check it. :meth:`write_stdout` and
    :meth:`write_stderr` stream output to the
    caller before the gate returns.
    """

    def __init__(self, client: "Client", request_id: Any, params: Mapping[str, Any]) -> None:
        self.client = client
        self.request_id = request_id
        self.call_id: str = str(params.get("callId", ""))
        self.gate: str = str(params.get("gate", ""))
        self.args: List[str] = _exact_list(params.get("args"), params.get("argsBase64"))
        raw = params.get("stdin")
        self.stdin: Optional[bytes] = None if raw is None else _unb64(raw)
        self.cwd: str = _exact(params.get("cwd", ""), params.get("cwdBase64"))
        self.process_id: str = str(params.get("processId", ""))
        self.sandbox_id: str = str(params.get("sandboxId", ""))
        deadline_ms = params.get("deadlineMs") or 0
        #: Unix time (seconds) by which the server wants the answer.
        self.deadline: Optional[float] = deadline_ms / 1000.0 if deadline_ms else None
        self.cancelled = threading.Event()
        self._lock = threading.Lock()
        self._answered = False

    def __repr__(self) -> str:
        return "GateCall(gate=%r, args=%r, process_id=%r)" % (self.gate, self.args, self.process_id)

    @property
    def sandbox(self) -> Optional["Sandbox"]:
        """The sandbox the caller runs in (``None`` if unknown)."""
        return self.client._sandboxes.get(self.sandbox_id)

    @property
    def args_bytes(self) -> List[bytes]:
        """The arguments as the caller's bytes."""
        return [_raw(a) for a in self.args]

    @property
    def cwd_bytes(self) -> bytes:
        """The caller's working directory as bytes."""
        return _raw(self.cwd)

    @property
    def stdin_text(self) -> Optional[str]:
        return None if self.stdin is None else self.stdin.decode("utf-8", "replace")

    def time_left(self) -> Optional[float]:
        """Seconds until the deadline (``None`` without one)."""
        return None if self.deadline is None else max(0.0, self.deadline - time.time())

    def write_stdout(self, data: Data) -> bool:
        """Send ``data`` to the caller's stdout now (``gate/output``).
        Returns False (and sends nothing) once the call is answered or
        cancelled."""
        return self._write("stdout", data)

    def write_stderr(self, data: Data) -> bool:
        """Like :meth:`write_stdout`, for stderr."""
        return self._write("stderr", data)

    def _write(self, stream: str, data: Data) -> bool:
        b = _to_bytes(data)
        with self._lock:
            if self._answered or self.cancelled.is_set():
                return False
            if not b:
                return True
            try:
                self.client._notify("gate/output", {"callId": self.call_id, "stream": stream, "chunk": _b64(b)})
            except ConnectionClosedError:
                return False
            return True


def _wire_list(ss: Sequence[str]) -> Tuple[List[str], Optional[List[Optional[str]]]]:
    """A list of exact strings as a field and its base64 sibling (``None``
    when every element is UTF-8; else ``null`` for those that are)."""
    out: List[str] = []
    b64: List[Optional[str]] = []
    odd = False
    for s in ss:
        raw = _raw(s)
        try:
            out.append(raw.decode("utf-8"))
            b64.append(None)
        except UnicodeDecodeError:
            out.append(raw.decode("utf-8", "replace"))
            b64.append(_b64(raw))
            odd = True
    return out, (b64 if odd else None)


class Grant:
    """A grant: calls of ``gate`` that run without asking. ``scope`` is
    ``"exact"`` (exactly the arguments ``exact``), ``"patterns"`` (as many
    arguments as ``patterns``, each matching its RE2 pattern in full) or
    ``"any"`` (whatever the gate's own policy allows); ``lifetime`` is
    ``"session"`` (the sandbox's life), ``"workspace"`` (sandboxes of the
    call's workspace) or ``"always"``; ``expires_ms`` (Unix ms) ends it.
    ``description`` says in words what it allows (offers only). The
    server offers some with every :class:`ApprovalRequest` (``offers``);
    the approval callback may return one (or one of its own) to keep it:
    a workspace or always grant goes into the server's grants file, as a
    person's own (``gatebridge grants ls`` lists it)."""

    def __init__(
        self,
        gate: str,
        scope: str,
        lifetime: str = "session",
        exact: Optional[Sequence[str]] = None,
        patterns: Optional[Sequence[str]] = None,
        workspace: str = "",
        expires_ms: int = 0,
        description: str = "",
    ) -> None:
        self.gate = gate
        self.scope = scope
        self.lifetime = lifetime
        self.exact: Optional[List[str]] = None if exact is None else list(exact)
        self.patterns: Optional[List[str]] = None if patterns is None else list(patterns)
        self.workspace = workspace
        self.expires_ms = expires_ms
        self.description = description

    @classmethod
    def from_wire(cls, d: Mapping[str, Any]) -> "Grant":
        scope = str(d.get("scope", ""))
        exact = _exact_list(d.get("exact"), d.get("exactBase64")) if scope == "exact" else None
        return cls(str(d.get("gate", "")), scope, str(d.get("lifetime", "")), exact=exact,
                   patterns=d.get("patterns") if scope == "patterns" else None,
                   workspace=str(d.get("workspace", "")), expires_ms=int(d.get("expiresMs") or 0),
                   description=str(d.get("description", "")))

    def to_wire(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"gate": self.gate, "scope": self.scope, "lifetime": self.lifetime}
        if self.exact is not None:
            d["exact"], b64 = _wire_list(self.exact)
            if b64 is not None:
                d["exactBase64"] = b64
        if self.patterns is not None:
            d["patterns"] = list(self.patterns)
        if self.workspace:
            d["workspace"] = self.workspace
        if self.expires_ms:
            d["expiresMs"] = self.expires_ms
        return d

    def __repr__(self) -> str:
        return "Grant(%r)" % (self.description or self.to_wire(),)


class ApprovalAnswer:
    """An approval callback's full answer: ``decision`` (``"allow"``,
    ``"deny"`` or ``"allowForSession"``), the ``reason`` shown on deny, a
    ``grant`` to keep with allow, and ``connection_only`` to keep it for
    the sandbox only (nothing goes into the grants file)."""

    def __init__(self, decision: str = "allow", reason: str = "", grant: Optional[Grant] = None,
                 connection_only: bool = False) -> None:
        self.decision = decision
        self.reason = reason
        self.grant = grant
        self.connection_only = connection_only


class ApprovalRequest:
    """The server asks whether a gate that needs approval may run (one
    registered with ``approval=True``, a configured gate with ``approval:
    ask``, or one the command policy marks ask: ``rule`` then says which
    rule). The callback returns ``"allow"``, ``"deny"`` or
    ``"allowForSession"`` (allow this gate for the rest of the sandbox's
    life), a bool (True: allow), a ``(decision, reason)`` tuple (the
    reason is shown to the caller on deny), a :class:`Grant` (allow, and
    keep the grant: one of ``offers``, or see :meth:`offer`), or an
    :class:`ApprovalAnswer`. ``args`` are exact, as in :class:`GateCall`
    (``args_bytes`` gives the bytes)."""

    def __init__(self, client: "Client", request_id: Any, params: Mapping[str, Any]) -> None:
        self.client = client
        self.request_id = request_id
        self.call_id: str = str(params.get("callId", ""))
        self.gate: str = str(params.get("gate", ""))
        self.args: List[str] = _exact_list(params.get("args"), params.get("argsBase64"))
        self.sandbox_id: str = str(params.get("sandboxId", ""))
        self.process_id: str = str(params.get("processId", ""))
        #: The grants the answer may give, narrowest first (empty from a
        #: server before grants).
        self.offers: List[Grant] = [Grant.from_wire(o) for o in (params.get("offers") or [])]
        #: What in the command policy asks, when it is what asks.
        self.rule: str = str(params.get("rule", ""))
        self.cancelled = threading.Event()

    def offer(self, lifetime: str, scope: Optional[str] = None) -> Optional[Grant]:
        """The first offer with this lifetime (and scope), or None."""
        for o in self.offers:
            if o.lifetime == lifetime and (scope is None or o.scope == scope):
                return o
        return None

    def __repr__(self) -> str:
        return "ApprovalRequest(gate=%r, args=%r, process_id=%r)" % (self.gate, self.args, self.process_id)

    @property
    def args_bytes(self) -> List[bytes]:
        """The arguments as the caller's bytes."""
        return [_raw(a) for a in self.args]

    @property
    def sandbox(self) -> Optional["Sandbox"]:
        return self.client._sandboxes.get(self.sandbox_id)


@dataclass
class _Gate:
    name: str
    fn: GateFunction


def _gate_result(ret: Any) -> Tuple[int, bytes, bytes]:
    """Turns what a gate function returned into (exit code, stdout, stderr)."""
    if ret is None:
        return 0, b"", b""
    if isinstance(ret, bool):
        raise TypeError("a gate returned a bool: return an int exit code, str/bytes output, or (exit_code, stdout, stderr)")
    if isinstance(ret, int):
        code, out, err = ret, b"", b""
    elif isinstance(ret, (str, bytes, bytearray, memoryview)):
        code, out, err = 0, _to_bytes(ret), b""
    elif isinstance(ret, tuple) and 1 <= len(ret) <= 3:
        parts = list(ret) + [None] * (3 - len(ret))
        if not isinstance(parts[0], int) or isinstance(parts[0], bool):
            raise TypeError("a gate's (exit_code, stdout, stderr) needs an int exit code, got %r" % (parts[0],))
        code, out, err = parts[0], _to_bytes(parts[1]), _to_bytes(parts[2])
    else:
        raise TypeError("a gate returned %s: return an int exit code, str/bytes output, or (exit_code, stdout, stderr)"
                        % type(ret).__name__)
    if not 0 <= code <= 255:
        raise ValueError("a gate's exit code must be 0-255, got %d" % code)
    return code, out, err


# ---------------------------------------------------------------- plumbing


class LineTooLongError(ValueError):
    """The server sent a line longer than the client's ``max_line_bytes``."""


class _LineReader:
    """Splits the server's byte stream into lines. What it has read stays
    in its buffer when a read raises (a signal handler's exception in the
    thread reading, KeyboardInterrupt): the next reader, on any thread,
    goes on from there, and no message is lost or cut. After the end of the
    stream or an error, every read gives the same again. A line longer
    than ``max_bytes`` (without its newline) raises
    :class:`LineTooLongError`, having held at most ``max_bytes`` and one
    read's worth of it."""

    def __init__(self, stream: IO[bytes], max_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self._read1: Optional[Callable[[int], bytes]] = getattr(stream, "read1", None)
        self._stream = stream
        self._max = max_bytes
        self._buf = bytearray()
        self._scanned = 0  # bytes of _buf known to hold no newline
        self._eof = False
        self._error: Optional[BaseException] = None

    def readline(self) -> bytes:
        """The next line with its newline; the rest of the stream at its
        end; b"" after that."""
        if self._read1 is None:  # a stream without read1: its own readline, capped
            if self._error is not None:
                raise self._error
            line = self._stream.readline(self._max + 2)
            if len(line) > self._max + (1 if line.endswith(b"\n") else 0):
                self._error = self._too_long()
                raise self._error
            return line
        while True:
            i = self._buf.find(b"\n", self._scanned)
            if i > self._max or (i < 0 and len(self._buf) > self._max):
                self._buf = bytearray()
                self._scanned = 0
                self._error = self._too_long()
            if i >= 0 and self._error is None:
                line = bytes(self._buf[: i + 1])
                del self._buf[: i + 1]
                self._scanned = 0
                return line
            self._scanned = len(self._buf)
            if self._error is not None:
                raise self._error
            if self._eof:
                line = bytes(self._buf)
                self._buf.clear()
                self._scanned = 0
                return line
            try:
                chunk = self._read1(65536)
            except (OSError, ValueError) as e:
                self._error = e
                raise
            if not chunk:
                self._eof = True
            else:
                self._buf += chunk

    def _too_long(self) -> LineTooLongError:
        return LineTooLongError("the gatebridge server sent a line over %d bytes (max_line_bytes): the connection is "
                                "closed" % self._max)


class _Pending:
    __slots__ = ("event", "result", "error", "on_error")

    def __init__(self, on_error: Optional[Callable[[GatebridgeError], None]] = None) -> None:
        self.event = threading.Event()
        self.result: Any = None
        self.error: Optional[GatebridgeError] = None
        # Called (on the reader thread) with an error response, for a
        # request nobody waits for.
        self.on_error = on_error


class _Pool:
    """A pool of daemon worker threads (so a gate that never returns does
    not hold up the interpreter's exit), grown on demand up to max_workers."""

    def __init__(self, max_workers: int, name: str) -> None:
        self._max = max(1, max_workers)
        self._name = name
        self._q: "queue.SimpleQueue[Optional[Callable[[], None]]]" = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._jobs = 0  # queued or running

    def submit(self, fn: Callable[[], None], max_queued: Optional[int] = None) -> bool:
        """Runs fn on a worker; False (and nothing runs) when max_queued
        jobs already wait for one."""
        with self._lock:
            if max_queued is not None and self._jobs >= self._max + max_queued:
                return False
            self._jobs += 1
            if self._jobs > self._threads and self._threads < self._max:
                self._threads += 1
                threading.Thread(target=self._work, name="%s-%d" % (self._name, self._threads), daemon=True).start()
        self._q.put(fn)
        return True

    @property
    def waiting(self) -> int:
        with self._lock:
            return max(0, self._jobs - self._max)

    def _work(self) -> None:
        while True:
            fn = self._q.get()
            if fn is None:
                return
            try:
                fn()
            except BaseException:  # noqa: BLE001 - a worker must survive
                log.exception("gatebridge_client: worker")
            finally:
                with self._lock:
                    self._jobs -= 1

    def shutdown(self) -> None:
        with self._lock:
            n = self._threads
        for _ in range(n):
            self._q.put(None)


def _key(request_id: Any) -> str:
    return json.dumps(request_id, sort_keys=True)


class _TCP:
    """A connected TCP socket: one thread may read while others write (the
    caller keeps writes whole)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def recv(self, n: int) -> bytes:
        return self.sock.recv(n)

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close_write(self) -> None:
        self.sock.shutdown(socket.SHUT_WR)


class _TLS(_TCP):
    """TLS over a connected TCP socket, for one reading thread and any
    number of writing ones at once. An ``ssl.SSLSocket`` cannot do that:
    OpenSSL forbids reading and writing one connection from two threads
    (they corrupt each other at random: a lost write, "[SSL] internal
    error"). So the TLS state is an ``ssl.SSLObject`` over memory buffers,
    used under a lock only for the in-memory work; the socket is read and
    written outside it, and the records go out in the order they were
    made."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, server_hostname: str) -> None:
        super().__init__(sock)
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._in, self._out, server_side=False, server_hostname=server_hostname)
        self._lock = threading.Lock()  # _tls, _in, _out
        self._send_lock = threading.Lock()  # the socket's sending side
        self._records: "collections.deque[bytes]" = collections.deque()  # made, not yet sent, in order
        # The handshake, before any other thread knows the connection (the
        # socket's timeout bounds it).
        while True:
            try:
                self._tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._take_records()
                self._send_records(True)
                data = sock.recv(65536)
                if not data:
                    raise ConnectionError("the server closed the connection during the TLS handshake")
                self._in.write(data)
        self._take_records()
        self._send_records(True)

    def _take_records(self) -> None:
        """Queues what the TLS state made (under _lock)."""
        data = self._out.read()
        if data:
            self._records.append(data)

    def _send_records(self, block: bool) -> None:
        """Sends the queued records in order. Whoever holds the send lock
        sends everything queued, and looks again after letting it go; a
        reader (block False) does not wait for a writer stuck in sendall."""
        while self._records:
            if not self._send_lock.acquire(blocking=block):
                return
            try:
                while True:
                    try:
                        data = self._records.popleft()
                    except IndexError:
                        break
                    self.sock.sendall(data)
            finally:
                self._send_lock.release()

    def recv(self, n: int) -> bytes:
        while True:
            with self._lock:
                try:
                    data: Optional[bytes] = self._tls.read(n)
                except ssl.SSLWantReadError:
                    data = None
                except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                    data = b""  # close_notify, or the connection closed between records
                self._take_records()  # reading can make records too (a key update)
            self._send_records(False)
            if data is not None:
                return data
            raw = self.sock.recv(65536)
            with self._lock:
                if raw:
                    self._in.write(raw)
                else:
                    self._in.write_eof()

    def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        with self._lock:
            while view:
                n = self._tls.write(view)
                view = view[n:]
            self._take_records()
        self._send_records(True)

    def close_write(self) -> None:
        with self._lock:
            try:
                self._tls.unwrap()  # makes close_notify; the reader reads on
            except ssl.SSLError:
                pass
            self._take_records()
        self._send_records(True)
        self.sock.shutdown(socket.SHUT_WR)


class _ConnReader(io.RawIOBase):
    """The reading side of a _TCP, as a binary file (wrap it in a
    BufferedReader for readline)."""

    def __init__(self, conn: _TCP) -> None:
        super().__init__()
        self._conn = conn

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self._conn.recv(len(b))
        b[: len(data)] = data
        return len(data)


class _ConnWriter:
    """The writing side of a _TCP, as a file object: close() ends the
    sending side only (the server reads end of file, stops and removes
    what the connection started, then closes its side, which the reader
    sees)."""

    def __init__(self, conn: _TCP) -> None:
        self._conn = conn

    def write(self, data: bytes) -> int:
        self._conn.sendall(data)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        try:
            self._conn.close_write()
        except OSError:
            pass


# ---------------------------------------------------------------- client


class Client:
    """A connection to a gatebridge server.

    ``Client()`` starts ``gatebridge serve --stdio`` (``$GATEBRIDGE_BIN``
    or ``gatebridge`` from ``PATH``; pass ``argv`` to choose, e.g.
    ``["gatebridge", "--config", "gb.yaml", "serve", "--stdio"]``) and
    initializes the connection. :meth:`connect_tcp` connects to a server
    started with ``serve --listen`` instead, and :meth:`connect` speaks
    over streams you already have. Use it as a context manager, or call
    :meth:`close`.

    on_approval: called (on a worker thread) for every ``approval/request``;
        without it every approval is denied.
    stderr: where the server's log goes (a file object, ``subprocess.DEVNULL``;
        default: this process's stderr).
    env, cwd: the server's environment and working directory.
    gate_workers: threads running gate functions and approvals at once.
    max_line_bytes: the longest line (one message) taken from the server
        (default :data:`DEFAULT_MAX_LINE_BYTES`, 16 MiB, the server's own
        cap); a longer one closes the connection (pending calls raise
        :class:`ConnectionClosedError` saying so). :meth:`connect` and
        :meth:`connect_tcp` take it too.
    max_queued_calls: server requests (gate calls, approvals) that may wait
        for a free worker (default 1024); beyond that one is answered at
        once with a :class:`LimitError` (the caller's gate exits 1), so a
        hostile server cannot make the client hold them without bound.
    """

    def __init__(
        self,
        argv: Optional[Sequence[str]] = None,
        *,
        on_approval: Optional[ApprovalCallback] = None,
        client_name: str = "gatebridge_client.py",
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        stderr: Optional[Union[int, IO[Any]]] = None,
        gate_workers: int = 32,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_queued_calls: int = 1024,
    ) -> None:
        if argv is None:
            argv = [default_binary(), "serve", "--stdio"]
        try:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=dict(env) if env is not None else None,
                cwd=cwd,
            )
        except FileNotFoundError as e:
            raise FileNotFoundError(
                "%s: cannot start the gatebridge server (build it with `make build`, then set "
                "GATEBRIDGE_BIN=/path/to/bin/gatebridge or put gatebridge on PATH)" % argv[0]) from e
        assert proc.stdin is not None and proc.stdout is not None
        self._setup(proc.stdout, proc.stdin, proc, on_approval, client_name, gate_workers, max_line_bytes=max_line_bytes,
                    max_queued_calls=max_queued_calls)

    @classmethod
    def connect(
        cls,
        reader: IO[bytes],
        writer: IO[bytes],
        *,
        token: Optional[str] = None,
        on_approval: Optional[ApprovalCallback] = None,
        client_name: str = "gatebridge_client.py",
        gate_workers: int = 32,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_queued_calls: int = 1024,
    ) -> "Client":
        """A client over streams already connected to a server (binary
        file objects: the server's output to read, its input to write).
        token: sent in initialize's ``authToken`` (a ``serve --listen``
        server requires it; over stdio it is not needed)."""
        client = cls.__new__(cls)
        client._setup(reader, writer, None, on_approval, client_name, gate_workers, token=token,
                      max_line_bytes=max_line_bytes, max_queued_calls=max_queued_calls)
        return client

    @classmethod
    def connect_tcp(
        cls,
        host: str,
        port: int,
        *,
        token: str,
        tls: Union[None, bool, ssl.SSLContext] = None,
        cafile: Optional[str] = None,
        server_hostname: Optional[str] = None,
        connect_timeout: float = 30.0,
        on_approval: Optional[ApprovalCallback] = None,
        client_name: str = "gatebridge_client.py",
        gate_workers: int = 32,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_queued_calls: int = 1024,
    ) -> "Client":
        """A client of a server started with ``gatebridge serve --listen
        ADDR --token-file FILE``, on another machine or in another
        container: the connection is the client's own (its sandboxes are
        removed when it closes).

        token: the contents of the server's token file (sent in
            initialize's ``authToken``; a wrong one raises
            :class:`GatebridgeError` with code :data:`UNAUTHORIZED`).
        tls: ``None``/``False`` for plain TCP (the server has no
            ``--tls-cert``), ``True`` for TLS checked against the system's
            CAs (or ``cafile``), or an ``ssl.SSLContext`` of your own.
        cafile: a PEM file of the CA (or self-signed certificate) to trust;
            implies TLS.
        server_hostname: the name the certificate must hold (default:
            ``host``).
        connect_timeout: seconds to connect (and finish the TLS handshake).
        """
        if not token:
            raise ValueError("connect_tcp needs the server's token (the contents of its --token-file)")
        context: Optional[ssl.SSLContext] = None
        if isinstance(tls, ssl.SSLContext):
            if cafile is not None:
                raise ValueError("pass cafile or an ssl.SSLContext, not both")
            context = tls
        elif tls or cafile is not None:
            context = ssl.create_default_context(cafile=cafile)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
        sock = socket.create_connection((host, port), timeout=connect_timeout)
        try:
            conn = _TLS(sock, context, server_hostname or host) if context is not None else _TCP(sock)
            sock.settimeout(None)
        except BaseException:
            sock.close()
            raise
        client = cls.__new__(cls)
        client._sock = sock
        client._setup(io.BufferedReader(_ConnReader(conn), 65536), _ConnWriter(conn),  # type: ignore[arg-type]
                      None, on_approval, client_name, gate_workers, token=token, max_line_bytes=max_line_bytes,
                      max_queued_calls=max_queued_calls)
        return client

    def _setup(
        self,
        reader: IO[bytes],
        writer: IO[bytes],
        proc: Optional["subprocess.Popen[bytes]"],
        on_approval: Optional[ApprovalCallback],
        client_name: str,
        gate_workers: int,
        token: Optional[str] = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_queued_calls: int = 1024,
    ) -> None:
        if isinstance(max_queued_calls, bool) or not isinstance(max_queued_calls, int) or max_queued_calls < 0:
            raise ValueError("max_queued_calls: want an int >= 0, got %r" % (max_queued_calls,))
        self._max_queued_calls = max_queued_calls
        if isinstance(max_line_bytes, bool) or not isinstance(max_line_bytes, int) or max_line_bytes < 1:
            raise ValueError("max_line_bytes: want a positive int, got %r" % (max_line_bytes,))
        self._reader = reader
        self._writer = writer
        self._proc = proc
        if not hasattr(self, "_sock"):
            self._sock: Optional[socket.socket] = None
        self._last_unmatched_error: Optional[Dict[str, Any]] = None
        self.on_approval = on_approval
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._pending: Dict[int, _Pending] = {}
        self._gates: Dict[str, _Gate] = {}
        self._sandboxes: Dict[str, Sandbox] = {}
        self._processes: Dict[str, Process] = {}
        self._calls: Dict[str, Union[GateCall, ApprovalRequest]] = {}
        self._closed_error: Optional[ConnectionClosedError] = None
        self._closing = False
        self._sandbox_ids = itertools.count(1)
        self._process_ids = itertools.count(1)
        self._events: "queue.SimpleQueue[Optional[Dict[str, Any]]]" = queue.SimpleQueue()
        # Who reads the server's lines (see _await): one thread at a time,
        # the reader thread unless a thread waiting for an answer takes over.
        self._lines = _LineReader(reader, max_line_bytes)
        self._read_cond = threading.Condition(threading.Lock())
        self._reading = False  # a thread holds the right to read the next line
        self._want_read = 0  # threads waiting in _await for that right
        self._read_ended = False  # the stream ended (or failed): nobody takes over
        self._pool = _Pool(gate_workers, "gatebridge-gate")
        self._reader_thread = threading.Thread(target=self._read_loop, name="gatebridge-reader", daemon=True)
        self._events_thread = threading.Thread(target=self._event_loop, name="gatebridge-events", daemon=True)
        self._reader_thread.start()
        self._events_thread.start()
        init: Dict[str, Any] = {"clientName": client_name, "protocolVersion": PROTOCOL_VERSION}
        if token is not None:
            init["authToken"] = token
        try:
            res = self.request("initialize", init, timeout=60)
            self._notify("initialized", {})
        except BaseException:
            self.close()
            raise
        self.server_info: Dict[str, Any] = res
        self.protocol_version: int = res.get("protocolVersion", PROTOCOL_VERSION)
        self.server_version: str = res.get("serverVersion", "")
        #: The backends the server offers: [{"name", "summary", "isolates"}].
        self.backends: List[Dict[str, Any]] = list(res.get("backends") or [])
        #: The connection's caps (maxProcesses, gateTimeoutMs, ...).
        self.limits: Dict[str, Any] = dict(res.get("limits") or {})

    # -- context manager

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def pid(self) -> Optional[int]:
        """The server's process id (``None`` for :meth:`connect` and
        :meth:`connect_tcp`)."""
        return self._proc.pid if self._proc is not None else None

    @property
    def closed(self) -> bool:
        return self._closed_error is not None

    @property
    def sandboxes(self) -> List["Sandbox"]:
        """The sandboxes this client has open."""
        with self._lock:
            return list(self._sandboxes.values())

    # -- requests

    def request(self, method: str, params: Optional[Mapping[str, Any]] = None, timeout: Optional[float] = None) -> Any:
        """Sends a request and returns its result; an error response raises
        :class:`GatebridgeError`. The low-level way to any method."""
        rid, p = self._send_request(method, params)
        if not self._await(p.event, timeout):
            with self._lock:
                self._pending.pop(rid, None)
            raise TimeoutError("%s: no response within %ss" % (method, timeout))
        if p.error is not None:
            raise _fresh(p.error)
        return p.result

    def _send_request(self, method: str, params: Optional[Mapping[str, Any]],
                      on_error: Optional[Callable[[GatebridgeError], None]] = None) -> Tuple[int, _Pending]:
        p = _Pending(on_error)
        with self._lock:
            if self._closed_error is not None:
                raise _fresh(self._closed_error)
            rid = next(self._ids)
            self._pending[rid] = p
        try:
            self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": dict(params or {})})
        except GatebridgeError:
            with self._lock:
                self._pending.pop(rid, None)
            raise
        return rid, p

    def _notify(self, method: str, params: Mapping[str, Any]) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": dict(params)})

    def _send(self, msg: Mapping[str, Any]) -> None:
        line = (json.dumps(msg, separators=(",", ":")) + "\n").encode("utf-8")
        with self._write_lock:
            if self._closed_error is not None:
                raise _fresh(self._closed_error)
            try:
                self._writer.write(line)
                self._writer.flush()
            except (OSError, ValueError) as e:
                raise ConnectionClosedError("cannot write to the gatebridge server: %s" % e) from e

    def _respond(self, request_id: Any, result: Any = None, error: Optional[GatebridgeError] = None) -> None:
        msg: Dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        if error is not None:
            err: Dict[str, Any] = {"code": error.code, "message": error.message}
            if error.data is not None:
                err["data"] = error.data
            msg["error"] = err
        else:
            msg["result"] = result
        try:
            self._send(msg)
        except ConnectionClosedError:
            pass

    # -- reading

    def _read_loop(self) -> None:
        why = "the gatebridge server closed the connection"
        too_long = False
        try:
            while True:
                with self._read_cond:
                    # A thread waiting in _await goes first: it reads until
                    # its answer is in, then hands the stream back.
                    while self._reading or self._want_read:
                        self._read_cond.wait()
                    self._reading = True
                line = self._lines.readline()
                if not line:
                    break
                self._handle_line(line)
                self._release_read()
        except LineTooLongError as e:
            why = str(e)
            too_long = True
            self._abort_transport()
        except (OSError, ValueError) as e:
            why = "reading from the gatebridge server failed: %s" % e
        with self._read_cond:
            # Nobody reads after this: threads waiting to take over wait
            # for their event instead (set by _connection_lost).
            self._read_ended = True
            self._read_cond.notify_all()
        if self._proc is not None and not self._closing and not too_long:
            try:
                code = self._proc.wait(timeout=2)
                why = "the gatebridge server exited (exit code %d)" % code
            except subprocess.TimeoutExpired:
                pass
        elif self._closing:
            why = "the client was closed"
        last = self._last_unmatched_error
        if last is not None and not self._closing:
            # The server said why before it closed (e.g. too many
            # connections), in an answer to no request of ours.
            why += ": %s (code %s)" % (last.get("message"), last.get("code"))
        self._connection_lost(ConnectionClosedError(why))

    def _abort_transport(self) -> None:
        """Closes both directions at once (the server sent what the client
        will not take): a server writing to it gets EPIPE, one reading
        from it the end of its input."""
        try:
            self._reader.close()
        except (OSError, ValueError):
            pass
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        # A thread stuck writing to a server that does not read holds the
        # lock; close() closes the writer later.
        if self._write_lock.acquire(blocking=False):
            try:
                self._writer.close()
            except (OSError, ValueError):
                pass
            finally:
                self._write_lock.release()

    def _release_read(self) -> None:
        with self._read_cond:
            self._reading = False
            if self._want_read:
                self._read_cond.notify_all()

    def _handle_line(self, line: bytes) -> None:
        """Parses and dispatches one line, on the thread that read it."""
        line = line.strip()
        if not line:
            return
        try:
            msg = json.loads(line)
        except ValueError:
            log.warning("gatebridge_client: the server sent a line that is not JSON: %r", line[:200])
            return
        if isinstance(msg, dict):
            try:
                self._dispatch(msg)
            except Exception:  # noqa: BLE001 - keep reading
                log.exception("gatebridge_client: handling %r", msg.get("method") or msg.get("id"))

    def _await(self, event: threading.Event, timeout: Optional[float] = None) -> bool:
        """Waits for ``event``, set when a line is handled (a response, the
        exit of a process without ``on_output``), like ``event.wait``.

        Without a timeout, the waiting thread reads and handles the
        server's lines itself while no other thread does (leader and
        followers): the line it waits for then wakes no other thread
        first. The reader thread finishes the line it is reading and
        hands over; it takes the stream back when this returns. Lines
        for others are handled as the reader thread would, in order; a
        thread waiting to take over is woken after each, in case it was
        its own."""
        if timeout is not None or event.is_set() or threading.current_thread() is self._reader_thread:
            return event.wait(timeout)
        lead = False
        with self._read_cond:
            self._want_read += 1
            try:
                while not event.is_set() and not self._read_ended and self._reading:
                    self._read_cond.wait()
                lead = not event.is_set() and not self._read_ended
                if lead:
                    self._reading = True
            finally:
                self._want_read -= 1
                if not lead and not self._want_read:
                    # The reader thread stopped for this thread (its answer
                    # came meanwhile): let it go on reading.
                    self._read_cond.notify_all()
        if not lead:
            return event.wait()
        try:
            while not event.is_set():
                try:
                    line = self._lines.readline()
                except (OSError, ValueError):
                    break  # the reader thread reads the same error and reports it
                if not line:
                    break  # the same: the end of the stream
                self._handle_line(line)
                if self._want_read:
                    with self._read_cond:
                        self._read_cond.notify_all()
        finally:
            self._release_read_to_all()
        return event.wait()

    def _release_read_to_all(self) -> None:
        with self._read_cond:
            self._reading = False
            self._read_cond.notify_all()  # the reader thread, and any waiting to lead

    def _deliver(self, msg: Dict[str, Any]) -> None:
        """Hands a notification to its process (events thread, or the
        reader thread for a process without on_output)."""
        method = msg.get("method")
        params = msg.get("params") or {}
        pid = params.get("processId")
        with self._lock:
            p = self._processes.get(pid) if isinstance(pid, str) else None
        if p is None:
            if method not in ("process/output", "process/exited", "process/gateCall"):
                log.debug("gatebridge_client: notification %s ignored", method)
            return
        if method == "process/output":
            p._on_output(int(params.get("seq", 0)), str(params.get("stream", "")), _unb64(params.get("chunk")))
        elif method == "process/gateCall":
            report = GateCallReport._parse(params.get("call"))
            if report is not None:
                p._on_gate_call(report)
        elif method == "process/exited":
            with self._lock:
                self._processes.pop(pid, None)
            p._on_exit(params)

    def _dispatch(self, msg: Dict[str, Any]) -> None:
        method = msg.get("method")
        if method is None:
            self._on_response(msg)
        elif "id" in msg and msg["id"] is not None:
            self._on_server_request(msg)
        elif method == "$/cancelRequest":
            rid = (msg.get("params") or {}).get("id")
            with self._lock:
                call = self._calls.get(_key(rid))
            if call is not None:
                call.cancelled.set()
        elif method in ("process/output", "process/exited", "process/gateCall") and self._inline(msg):
            # No user code to run for this process: deliver it here, one
            # thread hand-off fewer before wait() returns. Its events keep
            # their order (they all take this path), and no other
            # process's callbacks wait for them.
            self._deliver(msg)
        else:
            self._events.put(msg)

    def _inline(self, msg: Dict[str, Any]) -> bool:
        pid = (msg.get("params") or {}).get("processId")
        with self._lock:
            p = self._processes.get(pid) if isinstance(pid, str) else None
        return p is not None and p._inline

    def _on_response(self, msg: Dict[str, Any]) -> None:
        rid = msg.get("id")
        err = msg.get("error")
        if not isinstance(rid, int) or isinstance(rid, bool):
            if err:
                log.warning("gatebridge_client: server error without a request: %s", err)
                if isinstance(err, dict):
                    self._last_unmatched_error = err
            return
        with self._lock:
            p = self._pending.pop(rid, None)
        if p is None:
            return
        if err is not None:
            if not isinstance(err, dict):
                err = {"code": INTERNAL_ERROR, "message": str(err)}
            try:
                code = int(err.get("code", INTERNAL_ERROR))
            except (TypeError, ValueError):
                code = INTERNAL_ERROR
            p.error = error_for(code, str(err.get("message", "")), err.get("data"))
            if p.on_error is not None:
                p.on_error(p.error)
        else:
            p.result = msg.get("result")
        p.event.set()

    def _on_server_request(self, msg: Dict[str, Any]) -> None:
        rid = msg["id"]
        method = msg["method"]
        params = msg.get("params") or {}
        if method == "gate/call":
            call = GateCall(self, rid, params)
            with self._lock:
                self._calls[_key(rid)] = call
                gate = self._gates.get(call.gate)
            self._schedule(rid, lambda: self._run_gate(call, gate))
        elif method == "approval/request":
            req = ApprovalRequest(self, rid, params)
            with self._lock:
                self._calls[_key(rid)] = req
            self._schedule(rid, lambda: self._run_approval(req))
        else:
            self._respond(rid, error=GatebridgeError(METHOD_NOT_FOUND, "method not found: %r" % method))

    def _schedule(self, rid: Any, run: Callable[[], None]) -> None:
        """Runs a server request on a worker; beyond max_queued_calls
        waiting for one, answers it with an error at once (a hostile server
        cannot make the client hold requests without bound)."""
        if not self._pool.submit(run, self._max_queued_calls):
            with self._lock:
                self._calls.pop(_key(rid), None)
            self._respond(rid, error=LimitError("the client has %d calls waiting (max_queued_calls)"
                                                % self._pool.waiting))

    def _run_gate(self, call: GateCall, gate: Optional[_Gate]) -> None:
        result: Any = None
        error: Optional[GatebridgeError] = None
        try:
            if gate is None:
                raise LookupError("no handler for gate %r in this runtime" % call.gate)
            code, out, err = _gate_result(gate.fn(call))
            result = {"exitCode": code}
            if out:
                result["stdout"] = _b64(out)
            if err:
                result["stderr"] = _b64(err)
        except Exception as e:  # noqa: BLE001 - becomes the caller's exit 1
            msg = str(e) or type(e).__name__
            if not isinstance(e, GatebridgeError):
                msg = "%s: %s" % (type(e).__name__, msg) if str(e) else msg
            error = GatebridgeError(GATE_FAILED, msg, {"exception": type(e).__name__})
            log.debug("gatebridge_client: gate %s raised", call.gate, exc_info=True)
        finally:
            with call._lock:
                call._answered = True
            with self._lock:
                self._calls.pop(_key(call.request_id), None)
        if call.cancelled.is_set():
            # The server no longer waits for it (and ignores it): say so.
            result, error = None, GatebridgeError(REQUEST_CANCELLED, "request cancelled")
        self._respond(call.request_id, result, error)

    def _run_approval(self, req: ApprovalRequest) -> None:
        try:
            cb = self.on_approval
            if cb is None:
                decision: ApprovalDecision = ("deny", "no approval callback in this runtime (Client(on_approval=...))")
            else:
                decision = cb(req)
            reason = ""
            grant: Optional[Grant] = None
            connection_only = False
            if isinstance(decision, Grant):
                decision, grant = "allow", decision
            elif isinstance(decision, ApprovalAnswer):
                decision, reason, grant, connection_only = (decision.decision, decision.reason, decision.grant,
                                                            decision.connection_only)
            if isinstance(decision, tuple):
                decision, reason = decision[0], str(decision[1]) if len(decision) > 1 else ""
            if isinstance(decision, bool):
                decision = "allow" if decision else "deny"
            if decision not in _DECISIONS:
                raise ValueError("approval callback returned %r: want one of %s" % (decision, ", ".join(_DECISIONS)))
            result: Dict[str, Any] = {"decision": decision}
            if reason:
                result["reason"] = reason
            if grant is not None and decision == "allow":
                result["grant"] = grant.to_wire()
                if connection_only:
                    result["connectionOnly"] = True
            self._respond(req.request_id, result)
        except Exception as e:  # noqa: BLE001 - the gate is then not run
            self._respond(req.request_id, error=GatebridgeError(GATE_FAILED, "%s: %s" % (type(e).__name__, e)))
        finally:
            with self._lock:
                self._calls.pop(_key(req.request_id), None)

    def _event_loop(self) -> None:
        while True:
            msg = self._events.get()
            if msg is None:
                break
            self._deliver(msg)
        # The connection is gone: no exit will come for what still runs.
        with self._lock:
            procs = list(self._processes.values())
            self._processes.clear()
            err = self._closed_error
        for p in procs:
            p._on_lost(err or ConnectionClosedError("the connection is closed"))

    def _connection_lost(self, err: ConnectionClosedError) -> None:
        with self._lock:
            if self._closed_error is None:
                self._closed_error = err
            err = self._closed_error
            pending = list(self._pending.values())
            self._pending.clear()
            calls = list(self._calls.values())
        for p in pending:
            p.error = err
            p.event.set()
        for c in calls:
            c.cancelled.set()
        self._events.put(None)

    # -- gates

    @overload
    def gate(self, name: F) -> F: ...

    @overload
    def gate(
        self,
        name: Optional[str] = None,
        *,
        summary: Optional[str] = None,
        usage: str = "",
        params: Optional[Sequence[Mapping[str, Any]]] = None,
        input_schema: Optional[Mapping[str, Any]] = None,
        stdin: str = "if-no-args",
        timeout: Optional[float] = None,
        approval: bool = False,
        timeout_ms: Optional[int] = None,
    ) -> Callable[[F], F]: ...

    def gate(
        self,
        name: Any = None,
        *,
        summary: Optional[str] = None,
        usage: str = "",
        params: Optional[Sequence[Mapping[str, Any]]] = None,
        input_schema: Optional[Mapping[str, Any]] = None,
        stdin: str = "if-no-args",
        timeout: Optional[float] = None,
        approval: bool = False,
        timeout_ms: Optional[int] = None,
    ) -> Any:
        """Decorator: registers the function as a gate (see
        :meth:`register_gate`); ``name`` defaults to the function's name.
        Works bare (``@client.gate``) too."""
        if callable(name):
            fn = name
            self.register_gate(fn.__name__, fn)
            return fn
        timeout = _deprecated_ms(timeout, "timeout", timeout_ms, "timeout_ms")

        def deco(fn: F) -> F:
            self.register_gate(name or fn.__name__, fn, summary=summary, usage=usage, params=params,
                               input_schema=input_schema, stdin=stdin, timeout=timeout, approval=approval)
            return fn

        return deco

    def register_gate(
        self,
        name: str,
        fn: GateFunction,
        *,
        summary: Optional[str] = None,
        usage: str = "",
        params: Optional[Sequence[Mapping[str, Any]]] = None,
        input_schema: Optional[Mapping[str, Any]] = None,
        stdin: str = "if-no-args",
        timeout: Optional[float] = None,
        approval: bool = False,
        timeout_ms: Optional[int] = None,
    ) -> None:
        """Registers a gate: the command ``name`` appears in every sandbox of
        this connection, and each call runs ``fn(call)`` on a worker thread
        with a :class:`GateCall`.

        ``fn`` returns the answer: ``str``/``bytes`` (stdout, exit 0), an
        ``int`` (exit code), or ``(exit_code, stdout, stderr)``. An exception
        gives the caller exit 1 with its message.

        summary: one line (default: the first line of the docstring).
        usage: e.g. ``"lookup WORD"``. params: ``[{"name", "description",
        "required", "variadic"?, "flag"?}]`` or input_schema (a JSON Schema
        object). stdin: ``"if-no-args"`` (default: when the gate is called
        without arguments, so ``echo hi | g`` sends ``hi``), ``"none"``,
        ``"always"`` or ``"if-at-dash"``: when the caller's stdin is sent.
        timeout: seconds the client may take to answer (default: the
        server's, ``limits["gateTimeoutMs"]``, in milliseconds). approval:
        ask ``on_approval`` before every call. ``timeout_ms`` is the
        deprecated name of ``timeout`` in milliseconds.
        """
        timeout = _deprecated_ms(timeout, "timeout", timeout_ms, "timeout_ms")
        if summary is None:
            doc = (getattr(fn, "__doc__", None) or "").strip()
            summary = doc.splitlines()[0] if doc else ""
        p: Dict[str, Any] = {"name": name, "summary": summary, "usage": usage}
        if params is not None:
            p["params"] = [dict(x) for x in params]
        if input_schema is not None:
            p["inputSchema"] = dict(input_schema)
        if stdin:
            p["stdin"] = stdin
        t = _ms(timeout, "timeout")
        if t is not None:
            p["timeoutMs"] = t
        if approval:
            p["approval"] = True
        with self._lock:
            if name in self._gates:
                raise ConflictError("gate %r is already registered on this client" % name)
            self._gates[name] = _Gate(name, fn)
        try:
            self.request("gate/register", p)
        except BaseException:
            with self._lock:
                self._gates.pop(name, None)
            raise

    def unregister_gate(self, name: str) -> None:
        """Removes a registered gate from every sandbox of the connection."""
        self.request("gate/unregister", {"name": name})
        with self._lock:
            self._gates.pop(name, None)

    def list_gates(self) -> List[Dict[str, Any]]:
        """Every gate a sandbox offers (built-in, configured and registered),
        the same JSON as ``gatebridge gates --format json``: tool
        descriptions to give a model."""
        return list(self.request("gate/list") or [])

    # -- sandboxes and processes

    def open_sandbox(
        self,
        backend: str = "auto",
        workspace: Optional[str] = None,
        writable_workspace: bool = False,
        image: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        *,
        sandbox_id: Optional[str] = None,
        runtime: Optional[str] = None,
    ) -> "Sandbox":
        """Opens a sandbox: ``backend`` is ``"auto"`` (docker or bwrap,
        never unsandboxed unless the server's config allows it), ``"bwrap"``,
        ``"docker"`` or ``"local"`` (no isolation). ``workspace`` (default:
        the current directory) is the commands' working directory and the
        file gates' root; read-only unless ``writable_workspace``. The
        sandbox lives until :meth:`Sandbox.close` or the client closes:
        files written in it persist across its processes. ``runtime`` is
        the OCI runtime of a ``"docker"`` sandbox (``"runsc"`` for gVisor;
        one the engine has registered)."""
        sid = sandbox_id or "sb%d" % next(self._sandbox_ids)
        p: Dict[str, Any] = {"sandboxId": sid, "backend": backend,
                             "workspace": os.path.abspath(workspace or os.getcwd())}
        if writable_workspace:
            p["writableWorkspace"] = True
        if image:
            p["image"] = image
        if runtime:
            p["runtime"] = runtime
        e = _env(env)
        if e:
            p["env"] = e
        res = self.request("sandbox/open", p) or {}
        sb = Sandbox(self, str(res.get("sandboxId", sid)), str(res.get("backend", backend)), p["workspace"],
                     str(res.get("workspaceInside", p["workspace"])), str(res.get("reason", "")))
        with self._lock:
            self._sandboxes[sb.id] = sb
        return sb

    def list_processes(self) -> List[Dict[str, Any]]:
        """``process/list``: [{processId, sandboxId, argv, running, exitCode}]."""
        return list((self.request("process/list") or {}).get("processes") or [])

    def _start(self, sb: "Sandbox", argv: List[str], stdin: bool, timeout: Optional[float], cwd: Optional[str],
               env: Optional[Mapping[str, str]], on_output: Optional[OutputCallback], process_id: Optional[str],
               keep_output: bool, wait_response: bool = True,
               on_gate_call: Optional[GateCallCallback] = None, tty: Optional[Tuple[int, int]] = None,
               arg0: Optional[str] = None) -> "Process":
        pid = process_id or "p%d" % next(self._process_ids)
        proc = Process(self, sb, pid, argv, on_output, keep_output, stdin, on_gate_call)
        p: Dict[str, Any] = {"processId": pid, "sandboxId": sb.id, "argv": argv}
        if on_gate_call is not None:
            p["reportGateCalls"] = True
        if cwd:
            p["cwd"] = cwd
        e = _env(env)
        if e:
            p["env"] = e
        if stdin:
            p["stdin"] = True
        t = _ms(timeout, "timeout")
        if t is not None:
            p["timeoutMs"] = t
        if tty is not None:
            rows, cols = tty
            p["tty"] = {"rows": int(rows), "cols": int(cols)}
            proc._tty = True
        if arg0 is not None:
            p["arg0"] = arg0
        with self._lock:
            if pid in self._processes:
                raise ConflictError("process id %r is in use" % pid)
            # Before the request: output may come before its response.
            self._processes[pid] = proc
        try:
            if wait_response:
                self.request("process/start", p)
            else:
                # The caller waits for the exit, which the server sends after
                # this response: an error response ends that wait instead.
                self._send_request("process/start", p, proc._on_start_failed)
        except BaseException:
            with self._lock:
                if self._processes.get(pid) is proc:
                    del self._processes[pid]
            raise
        return proc

    # -- closing

    def close(self, timeout: float = 30.0) -> None:
        """Closes the connection: the server's stdin is closed, so it stops
        and removes every process and sandbox of the connection; then waits
        up to ``timeout`` seconds for it to exit (then terminates it).
        Over TCP (:meth:`connect_tcp`) the sending side is closed, and it
        waits up to ``timeout`` seconds for the server to close its side,
        which it does once it has removed everything. Calls still pending
        raise :class:`ConnectionClosedError`."""
        with self._lock:
            already = self._closing
            self._closing = True
            calls = list(self._calls.values())
        for c in calls:
            c.cancelled.set()
        if not already:
            with self._write_lock:
                try:
                    self._writer.close()
                except (OSError, ValueError):
                    pass
        if self._proc is not None:
            try:
                self._proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                log.warning("gatebridge_client: the server did not exit within %ss of close(); terminating it", timeout)
                self._proc.terminate()
                try:
                    self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
        if threading.current_thread() is not self._reader_thread:
            self._reader_thread.join(timeout=timeout if self._proc is None else 5)
        if self._sock is not None:
            try:  # wakes the reader if the server never closed its side
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            if threading.current_thread() is not self._reader_thread:
                self._reader_thread.join(timeout=5)
            try:
                self._reader.close()
            except (OSError, ValueError):
                pass
            self._sock.close()
        if self._proc is not None and self._proc.stdout is not None:
            try:
                self._proc.stdout.close()
            except (OSError, ValueError):
                pass
        if threading.current_thread() is not self._events_thread:
            self._events_thread.join(timeout=5)
        self._pool.shutdown()


# ---------------------------------------------------------------- sandbox


class Sandbox:
    """An open sandbox. Commands run with the workspace as their working
    directory (``cwd`` is relative to it, or absolute as the sandbox sees
    it: :attr:`workspace_inside`)."""

    def __init__(self, client: Client, sandbox_id: str, backend: str, workspace: str, workspace_inside: str,
                 reason: str) -> None:
        self.client = client
        self.id = sandbox_id
        #: The backend it runs on ("bwrap", "docker", "local").
        self.backend = backend
        self.workspace = workspace
        self.workspace_inside = workspace_inside
        #: Why this backend (for "auto").
        self.reason = reason
        self._closed = False

    def __repr__(self) -> str:
        return "Sandbox(id=%r, backend=%r, workspace=%r)" % (self.id, self.backend, self.workspace)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def run(
        self,
        command: Command,
        stdin: Optional[Data] = None,
        *_deprecated: Any,
        timeout: Optional[float] = None,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        on_output: Optional[OutputCallback] = None,
        timeout_ms: Optional[int] = None,
        on_gate_call: Optional[GateCallCallback] = None,
        tty: Optional[Tuple[int, int]] = None,
        arg0: Optional[str] = None,
    ) -> RunResult:
        """Runs a command to its end and returns its :class:`RunResult`.

        ``command``: a str is run by POSIX sh (``["sh", "-c", command]``); a
        list is an argv. ``stdin``: bytes or str fed to the command, then
        EOF (default: no input, /dev/null). ``timeout``: seconds; stop it
        after that long (TERM, then KILL; ``timed_out`` is set; default:
        the server's, ``limits["defaultTimeoutMs"]``). ``on_output``:
        called with ``(stream, bytes)`` as output arrives. ``on_gate_call``:
        called with each :class:`GateCallReport` as the call is answered
        (the result's ``gate_calls`` lists them either way). ``tty`` and
        ``arg0``: as in :meth:`start`.

        Deprecated, for one release: ``timeout_ms=`` (milliseconds), and
        ``timeout_ms, cwd, env`` by position after ``stdin`` (both warn
        with a DeprecationWarning)."""
        if _deprecated:
            old = _old_positional("Sandbox.run", ("timeout_ms", "cwd", "env"), _deprecated,
                                  {"timeout_ms": timeout_ms if timeout is None else timeout, "cwd": cwd, "env": env})
            timeout_ms = old.get("timeout_ms", timeout_ms)
            cwd = old.get("cwd", cwd)
            env = old.get("env", env)
        timeout = _deprecated_ms(timeout, "timeout", timeout_ms, "timeout_ms")
        if stdin is None:
            # Nothing to send before the exit: wait for that alone (one
            # wake-up of this thread instead of two, the response and the
            # exit).
            p = self.client._start(self, _argv(command), False, timeout, cwd, env, on_output, None, True,
                                   wait_response=False, on_gate_call=on_gate_call, tty=tty, arg0=arg0)
        else:
            p = self.start(command, stdin=True, timeout=timeout, cwd=cwd, env=env, on_output=on_output,
                           on_gate_call=on_gate_call, tty=tty, arg0=arg0)
        try:
            if stdin is not None:
                try:
                    p.write(stdin)
                    p.close_stdin()
                except GatebridgeError as e:
                    # The command exited without reading all of it (like a
                    # broken pipe): its result is what counts.
                    if isinstance(e, ConnectionClosedError) or "stdin is closed" not in e.message:
                        raise
            return p.wait()
        except BaseException:
            if p.running and not self.client.closed:
                try:
                    p.signal("KILL")
                except GatebridgeError:
                    pass
            raise

    def start(
        self,
        command: Command,
        *,
        stdin: Union[bool, Data] = True,
        timeout: Optional[float] = None,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        on_output: Optional[OutputCallback] = None,
        process_id: Optional[str] = None,
        keep_output: bool = True,
        timeout_ms: Optional[int] = None,
        on_gate_call: Optional[GateCallCallback] = None,
        tty: Optional[Tuple[int, int]] = None,
        arg0: Optional[str] = None,
    ) -> "Process":
        """Starts a command in the background and returns its
        :class:`Process`.

        ``stdin``: True (default) gives it a pipe to :meth:`Process.write` to
        (EOF at :meth:`Process.close_stdin`); False gives /dev/null;
        bytes/str are written, then stdin is closed. ``on_output(stream,
        data)`` is called for every chunk, in order, on the events thread.
        ``keep_output=False`` does not keep the output in memory
        (:meth:`Process.wait` then returns empty stdout/stderr).
        ``timeout``: seconds, as in :meth:`run` (``timeout_ms`` is its
        deprecated name in milliseconds). ``on_gate_call(report)`` is
        called for each gate call, as in :meth:`run`, on the events
        thread, in order with ``on_output``.

        ``tty=(rows, cols)`` runs it on a pseudo-terminal of that size:
        its output is one stream (``stdout``, with ``\\r\\n`` line ends;
        stderr is merged into it), what you write is typed at the terminal
        and :meth:`Process.close_stdin` sends end-of-file (Ctrl-D);
        :meth:`Process.resize` changes the size. ``arg0``: the ``argv[0]``
        the command sees. A backend that cannot do either (the sh agent;
        bwrap before 0.9 for ``arg0``) raises :class:`InvalidParamsError`
        naming it."""
        timeout = _deprecated_ms(timeout, "timeout", timeout_ms, "timeout_ms")
        data: Optional[bytes] = None
        if not isinstance(stdin, bool):
            data, stdin = _to_bytes(stdin), True
        p = self.client._start(self, _argv(command), stdin, timeout, cwd, env, on_output, process_id, keep_output,
                               on_gate_call=on_gate_call, tty=tty, arg0=arg0)
        if data is not None:
            try:
                p.write(data)
                p.close_stdin()
            except GatebridgeError as e:
                if isinstance(e, ConnectionClosedError) or "stdin is closed" not in e.message:
                    raise
        return p

    @property
    def fs(self) -> SandboxFS:
        """The files of the workspace: :class:`SandboxFS`."""
        return SandboxFS(self)

    def read_file(self, path: Union[str, bytes]) -> bytes:
        """The whole file ``path`` of the workspace (``self.fs.read``)."""
        return SandboxFS(self).read(path)

    def write_file(self, path: Union[str, bytes], data: Data) -> None:
        """Replaces the file ``path`` of the workspace atomically
        (``self.fs.write``)."""
        SandboxFS(self).write(path, data)

    def close(self) -> None:
        """Stops the sandbox's processes and removes the sandbox."""
        if self._closed:
            return
        self._closed = True
        try:
            if not self.client.closed:
                self.client.request("sandbox/close", {"sandboxId": self.id})
        finally:
            with self.client._lock:
                self.client._sandboxes.pop(self.id, None)


# ---------------------------------------------------------------- files


def _path_params(field: str, path: Union[str, bytes]) -> Dict[str, Any]:
    """``{field: path}``, with ``fieldBase64`` when the path is not UTF-8
    (bytes, or a str holding lone surrogates from ``surrogateescape``)."""
    raw = path if isinstance(path, bytes) else path.encode("utf-8", "surrogateescape")
    try:
        return {field: raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {field: raw.decode("utf-8", "replace"), field + "Base64": base64.b64encode(raw).decode("ascii")}


class FileInfo(NamedTuple):
    """One entry of :meth:`SandboxFS.list` or :meth:`SandboxFS.stat` (a
    link is described, not followed). ``name`` holds bytes that are not
    UTF-8 as lone surrogates (``os.fsencode`` gives them back)."""
    name: str
    type: str  # "file", "directory", "symlink" or "other"
    size: int
    mode: int  # permission bits
    mtime: float  # seconds since the epoch (0.0: unknown)

    @property
    def is_file(self) -> bool:
        return self.type == "file"

    @property
    def is_dir(self) -> bool:
        return self.type == "directory"

    @property
    def is_symlink(self) -> bool:
        return self.type == "symlink"


def _file_info(e: Mapping[str, Any]) -> FileInfo:
    return FileInfo(_exact(e.get("fileName"), e.get("fileNameBase64")), str(e.get("type") or "other"),
                    int(e.get("size") or 0), int(e.get("mode") or 0), float(e.get("modifiedAtMs") or 0) / 1000.0)


class SandboxFS:
    """The files of a sandbox's workspace (``sandbox.fs``), through the
    protocol's ``fs/*`` methods: paths are relative to the workspace or
    absolute as its commands see it; no link is followed, nothing outside
    the workspace or under a protected path is reached (docs/jsonrpc.md,
    "Files"). Data moves in chunks of at most ``limits["maxFsChunkBytes"]``."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox

    def _call(self, method: str, path: Union[str, bytes], **params: Any) -> Any:
        p: Dict[str, Any] = {"sandboxId": self._sb.id}
        p.update(_path_params("path", path))
        p.update(params)
        return self._sb.client.request(method, p)

    @property
    def _chunk(self) -> int:
        return int(self._sb.client.limits.get("maxFsChunkBytes") or (1 << 20))

    def read_chunk(self, path: Union[str, bytes], offset: int = 0, length: int = 0) -> Tuple[bytes, int, bool]:
        """Up to ``length`` bytes (0: one chunk) from ``offset``: ``(data,
        size, eof)``."""
        r = self._call("fs/read", path, offset=offset, length=length)
        return _unb64(r.get("data")), int(r.get("size") or 0), bool(r.get("eof"))

    def read(self, path: Union[str, bytes]) -> bytes:
        """The whole file, read chunk by chunk."""
        out, off = bytearray(), 0
        while True:
            data, _, eof = self.read_chunk(path, off)
            out += data
            off += len(data)
            if eof or not data:
                return bytes(out)

    def read_text(self, path: Union[str, bytes], encoding: str = "utf-8") -> str:
        return self.read(path).decode(encoding)

    def write(self, path: Union[str, bytes], data: Data) -> None:
        """Replaces the file with ``data`` atomically, making missing parent
        directories. Data over one chunk goes to a temporary file beside it,
        renamed over the file at the end."""
        b = _to_bytes(data)
        n = self._chunk
        if len(b) <= n:
            self._call("fs/write", path, data=_b64(b))
            return
        raw = path if isinstance(path, bytes) else path.encode("utf-8", "surrogateescape")
        head, _, base = raw.rpartition(b"/")
        tmp = (head + b"/" if head or raw.startswith(b"/") else b"") + b"." + base + b".gb-upload-" + os.urandom(6).hex().encode()
        try:
            self._call("fs/write", tmp, data=_b64(b[:n]))
            for i in range(n, len(b), n):
                self._call("fs/write", tmp, data=_b64(b[i:i + n]), append=True)
            p = _path_params("newPath", raw)
            self._call("fs/rename", tmp, overwrite=True, **p)
        except BaseException:
            try:
                self._call("fs/remove", tmp, force=True)
            except GatebridgeError:
                pass
            raise

    def append(self, path: Union[str, bytes], data: Data) -> None:
        """Adds ``data`` at the end of the file (made if missing)."""
        b = _to_bytes(data)
        n = self._chunk
        for i in range(0, max(len(b), 1), n):
            self._call("fs/write", path, data=_b64(b[i:i + n]), append=True)

    def write_at(self, path: Union[str, bytes], offset: int, data: Data) -> None:
        """Writes ``data`` (one chunk at most) in place at ``offset``."""
        self._call("fs/write", path, data=_b64(data), offset=offset)

    def list(self, path: Union[str, bytes] = ".") -> List[FileInfo]:
        """The directory's entries, sorted by name."""
        r = self._call("fs/list", path)
        return [_file_info(e) for e in r.get("entries") or []]

    def stat(self, path: Union[str, bytes]) -> FileInfo:
        return _file_info(self._call("fs/stat", path))

    def exists(self, path: Union[str, bytes]) -> bool:
        try:
            self.stat(path)
            return True
        except GatebridgeError as e:
            if e.code == -32001:
                return False
            raise

    def remove(self, path: Union[str, bytes], recursive: bool = False, force: bool = False) -> None:
        self._call("fs/remove", path, recursive=recursive, force=force)

    def mkdir(self, path: Union[str, bytes], recursive: bool = False) -> None:
        self._call("fs/mkdir", path, recursive=recursive)

    def rename(self, path: Union[str, bytes], new_path: Union[str, bytes], overwrite: bool = False) -> None:
        self._call("fs/rename", path, overwrite=overwrite, **_path_params("newPath", new_path))


# ---------------------------------------------------------------- process


class Process:
    """A command started with :meth:`Sandbox.start`."""

    def __init__(self, client: Client, sandbox: Sandbox, process_id: str, argv: List[str],
                 on_output: Optional[OutputCallback], keep_output: bool, has_stdin: bool,
                 on_gate_call: Optional[GateCallCallback] = None) -> None:
        self.client = client
        self.sandbox = sandbox
        self.id = process_id
        self.argv = argv
        self.on_output = on_output
        # Without a callback its notifications need no events thread (the
        # reader thread delivers them); fixed at start, so that they all
        # take the same path and keep their order.
        self.on_gate_call = on_gate_call
        self._inline = on_output is None and on_gate_call is None
        self._keep = keep_output
        self._has_stdin = has_stdin
        self._tty = False  # started with tty: resize applies
        self._cond = threading.Condition()
        self._stdout: List[bytes] = []
        self._stderr: List[bytes] = []
        self._last_seq = 0
        self._reported: List[GateCallReport] = []
        self._exited = threading.Event()
        self._exit: Optional[Dict[str, Any]] = None
        self._lost: Optional[GatebridgeError] = None  # the connection, or process/start, failed

    def __repr__(self) -> str:
        return "Process(id=%r, argv=%r, exit_code=%r)" % (self.id, self.argv, self.exit_code)

    def __enter__(self) -> "Process":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.running and not self.client.closed:
            try:
                self.signal("KILL")
                self.wait(timeout=30)
            except (GatebridgeError, TimeoutError):
                pass

    # -- state

    @property
    def running(self) -> bool:
        return not self._exited.is_set()

    @property
    def exit_code(self) -> Optional[int]:
        """The exit code, or None while it runs."""
        e = self._exit
        return None if e is None else int(e.get("exitCode", 0))

    def poll(self) -> Optional[int]:
        """Like :attr:`exit_code` (subprocess.Popen's name)."""
        return self.exit_code

    @property
    def stdout(self) -> bytes:
        """The stdout received so far."""
        with self._cond:
            return b"".join(self._stdout)

    @property
    def stderr(self) -> bytes:
        with self._cond:
            return b"".join(self._stderr)

    @property
    def gate_calls(self) -> List[GateCallReport]:
        """The gate calls the command made: once it has exited, those
        ``process/exited`` lists; before, none (or, with
        ``on_gate_call``, those reported so far)."""
        e = self._exit
        if e is not None:
            return _gate_calls(e)[0]
        with self._cond:
            return list(self._reported)

    # -- control

    def write(self, data: Data) -> None:
        """Writes to the process's stdin (it was started with stdin=True).
        Waits while the server's stdin queue for it is full."""
        b = _to_bytes(data)
        if not self._has_stdin:
            raise InvalidParamsError("process %r was started without stdin (start(..., stdin=True))" % self.id)
        for i in range(0, len(b), _WRITE_CHUNK):
            chunk = _b64(b[i:i + _WRITE_CHUNK])
            delay = 0.002
            while True:
                try:
                    self.client.request("process/write", {"processId": self.id, "chunk": chunk})
                    break
                except GatebridgeError as e:
                    # The process has not read what is queued yet: back off.
                    if e.code != LIMIT or not self.running:
                        raise
                    time.sleep(delay)
                    delay = min(delay * 2, 0.1)

    def close_stdin(self) -> None:
        """Closes the process's stdin (it reads EOF after what was written)."""
        if self._has_stdin:
            self.client.request("process/closeStdin", {"processId": self.id})

    def resize(self, rows: int, cols: int) -> bool:
        """``process/resize``: changes the size of the terminal of a process
        started with ``tty`` (it gets SIGWINCH). Returns False if the
        process had already exited."""
        if not self._tty:
            raise InvalidParamsError("process %r was started without tty" % self.id)
        if not self.running:
            return False
        try:
            self.client.request("process/resize", {"processId": self.id, "rows": int(rows), "cols": int(cols)})
        except GatebridgeError as e:
            if e.code == NOT_FOUND:
                return False
            raise
        return True

    def signal(self, sig: Union[str, int] = "TERM") -> bool:
        """Sends a signal ("INT", "TERM", "KILL", "HUP", or a
        ``signal.SIG*`` number) to the process's whole process group.
        Returns False if the process had already exited."""
        name = _signal_name(sig)
        if not self.running:
            return False
        try:
            self.client.request("process/signal", {"processId": self.id, "signal": name})
        except GatebridgeError as e:
            if e.code == NOT_FOUND:
                return False
            raise
        return True

    def terminate(self) -> bool:
        return self.signal("TERM")

    def kill(self) -> bool:
        return self.signal("KILL")

    def wait(self, timeout: Optional[float] = None) -> RunResult:
        """Waits for the process to exit and returns its :class:`RunResult`
        (every ``on_output`` callback has run by then). Raises
        ``TimeoutError`` after ``timeout`` seconds, and
        :class:`ConnectionClosedError` if the server went away."""
        # The exit of a process without on_output is handled by whoever
        # reads it: this thread may read it itself. Otherwise it comes on
        # the events thread, after the callbacks.
        done = self.client._await(self._exited, timeout) if self._inline else self._exited.wait(timeout)
        if not done:
            raise TimeoutError("process %s still runs after %ss" % (self.id, timeout))
        if self._lost is not None:
            raise _fresh(self._lost)
        e = self._exit or {}
        answer = None
        if e.get("answer") is not None or e.get("answerBase64") is not None:
            answer = _exact(e.get("answer"), e.get("answerBase64"))
        calls, dropped = _gate_calls(e)
        return RunResult(int(e.get("exitCode", 0)), self.stdout, self.stderr, e.get("signal") or None,
                         bool(e.get("timedOut", False)), answer, calls, dropped)

    def read(self, after_seq: int = 0, max_bytes: Optional[int] = None, *_deprecated: Any,
             wait: Optional[float] = None, wait_ms: Optional[int] = None) -> ReadResult:
        """``process/read``: the retained output chunks after ``after_seq``
        (for polling or catching up), waiting up to ``wait`` seconds for
        one (``wait_ms``, or a third positional argument, is the
        deprecated form in milliseconds)."""
        if _deprecated:
            wait_ms = _old_positional("Process.read", ("wait_ms",), _deprecated,
                                      {"wait_ms": wait_ms if wait is None else wait})["wait_ms"]
        wait = _deprecated_ms(wait, "wait", wait_ms, "wait_ms")
        p: Dict[str, Any] = {"processId": self.id, "afterSeq": int(after_seq)}
        if max_bytes:
            p["maxBytes"] = int(max_bytes)
        w = _ms(wait, "wait")
        if w is not None:
            p["waitMs"] = w
        r = self.client.request("process/read", p) or {}
        chunks = [Chunk(int(c.get("seq", 0)), str(c.get("stream", "")), _unb64(c.get("chunk"))) for c in r.get("chunks") or []]
        ec = r.get("exitCode")
        return ReadResult(chunks, bool(r.get("exited")), None if ec is None else int(ec), int(r.get("firstSeq", 0)),
                          int(r.get("nextSeq", 0)))

    def snapshot(self) -> Snapshot:
        """``process/snapshot``: the retained head and tail of stdout and
        stderr (capped by the server, see ``client.limits``)."""
        r = self.client.request("process/snapshot", {"processId": self.id}) or {}
        ec = r.get("exitCode")
        return Snapshot(_unb64(r.get("stdout")), _unb64(r.get("stderr")), bool(r.get("truncated")),
                        int(r.get("omittedBytes", 0)), None if ec is None else int(ec), bool(r.get("running")))

    def status(self, *_deprecated: Any, timeout: Optional[float] = None,
               timeout_ms: Optional[int] = None) -> Dict[str, Any]:
        """``process/wait`` on the server: ``{exitCode, signal, timedOut,
        running}`` (the protocol's names); waits up to ``timeout`` seconds
        (None: until it exits). ``timeout_ms``, or a positional argument,
        is the deprecated form in milliseconds."""
        if _deprecated:
            timeout_ms = _old_positional("Process.status", ("timeout_ms",), _deprecated,
                                         {"timeout_ms": timeout_ms if timeout is None else timeout})["timeout_ms"]
        timeout = _deprecated_ms(timeout, "timeout", timeout_ms, "timeout_ms")
        p: Dict[str, Any] = {"processId": self.id}
        t = _ms(timeout, "timeout")
        if t is not None:
            p["timeoutMs"] = t
        return dict(self.client.request("process/wait", p) or {})

    # -- notifications (events thread)

    def _on_output(self, seq: int, stream: str, data: bytes) -> None:
        with self._cond:
            if seq <= self._last_seq:
                return  # a repeat
            if seq != self._last_seq + 1:
                log.warning("gatebridge_client: process %s: output seq %d after %d", self.id, seq, self._last_seq)
            self._last_seq = seq
            if self._keep:
                (self._stdout if stream == "stdout" else self._stderr).append(data)
        cb = self.on_output
        if cb is not None and not self._inline:
            try:
                cb(stream, data)
            except Exception:  # noqa: BLE001 - never kill the events thread
                log.exception("gatebridge_client: on_output callback of process %s", self.id)

    def _on_gate_call(self, report: GateCallReport) -> None:
        with self._cond:
            self._reported.append(report)
        cb = self.on_gate_call
        if cb is not None:
            try:
                cb(report)
            except Exception:  # noqa: BLE001 - never kill the events thread
                log.exception("gatebridge_client: on_gate_call callback of process %s", self.id)

    def _on_exit(self, params: Mapping[str, Any]) -> None:
        self._exit = dict(params)
        self._exited.set()

    def _on_start_failed(self, err: GatebridgeError) -> None:
        with self.client._lock:
            if self.client._processes.get(self.id) is self:
                del self.client._processes[self.id]
        if not self._exited.is_set():
            self._lost = err
            self._exited.set()

    def _on_lost(self, err: ConnectionClosedError) -> None:
        if not self._exited.is_set():
            self._lost = err
            self._exited.set()


if __name__ == "__main__":  # pragma: no cover - a smoke test
    with Client() as _c:
        _sb = _c.open_sandbox(backend=sys.argv[1] if len(sys.argv) > 1 else "auto")
        _r = _sb.run(sys.argv[2] if len(sys.argv) > 2 else "echo hello from $(uname -s)")
        sys.stdout.buffer.write(_r.stdout)
        sys.stderr.buffer.write(_r.stderr)
        sys.exit(_r.exit_code)
