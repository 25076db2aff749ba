#!/usr/bin/python3
"""Hostile network peers for salamander's listening ports (issue 15, item 3).

    hostile.py {basp|http} CASE --port P [--host H] [options]

    hostile.py tls CASE --port P ...   (a BASP port of a process run with --tls)

Cases: random, truncated, oversized, silent, slow, many, old. Each does what
a hostile or broken peer does and prints one JSON line saying what the
target did in return (answers, closes and when); tests/integration/
hostile_test.sh runs them and then checks that the target still serves.
Exit status 0 means the case ran; 2 that it could not (e.g. no connection).

basp speaks CAF 0.17.6's BASP (libcaf_io/caf/io/basp/header.hpp): a 32-byte
big-endian header (operation u8, 2 padding bytes, flags u8, payload_len u32,
operation_data u64, source actor u64, destination actor u64) and a payload;
the acceptor sends its server handshake first. http speaks HTTP/1.x to
`salamander serve --listen`. tls throws the same kinds of input at a port
that speaks only TLS with certificates of the cluster's CA: BASP bytes in
plaintext, and TLS that never completes (a ClientHello cut short, sent a byte
at a time, or without a certificate to follow it; record and handshake
lengths past TLS's limits; TLS 1.0/1.2 and SSLv2 hellos). It prints, for each
connection, its local port (for the target's log), when the target closed it
and how TLS should have ended it: "refused" at once, or "bound" by the
target's handshake deadline. Standard library only (Debian's python3).
"""

import argparse
import json
import random
import re
import select
import selectors
import socket
import ssl
import struct
import sys
import threading
import time

HEADER = struct.Struct(">BBBBIQQQ")  # 32 bytes
SERVER_HANDSHAKE, CLIENT_HANDSHAKE, DIRECT_MESSAGE = 0, 1, 2
BASP_VERSION = 3  # caf/io/basp/version.hpp in 0.17.6

# caf/detail/atom_val.hpp: 6 bits a character after a 0xF start
_ATOM_CHARS = " 0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"


def atom(text):
    value = 0xF
    for ch in text:
        value = ((value << 6) | _ATOM_CHARS.index(ch)) & 0xFFFFFFFFFFFFFFFF
    return value


def varbyte(n):
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def cstring(s):
    b = s.encode()
    return varbyte(len(b)) + b


def node_id(rng):
    # node_id::default_data: implementation atom, process id, 20-byte host id
    return struct.pack(">QI", atom("default"), rng.randrange(1, 1 << 31)) + bytes(
        rng.randrange(1, 256) for _ in range(20))


def message(*elements):
    """caf::message: type number 0, "@<>+name+...", then each value."""
    names, values = [], b""
    for kind, value in elements:
        names.append(kind)
        if kind == "@atom":
            values += struct.pack(">Q", atom(value))
        elif kind == "@u32":
            values += struct.pack(">I", value)
        elif kind == "@str":
            values += cstring(value)
        else:
            raise ValueError(kind)
    return struct.pack(">H", 0) + cstring("@<>+" + "+".join(names)) + values


def connect(args, timeout=10.0):
    s = socket.create_connection((args.host, args.port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exactly(s, n, timeout):
    s.settimeout(timeout)
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return buf


def read_frame(s, timeout=10.0):
    head = HEADER.unpack(recv_exactly(s, HEADER.size, timeout))
    payload = recv_exactly(s, head[4], timeout) if head[4] else b""
    return head, payload


def server_handshake(s):
    """Reads the acceptor's server handshake; the published actor's id."""
    (op, _, _, _, length, version, _, _), payload = read_frame(s)
    if op != SERVER_HANDSHAKE:
        raise ConnectionError("expected a server handshake, got operation %d" % op)
    # payload: node_id, app identifiers, published actor id, interface
    pos = 8 + 4 + 20
    count, pos = _varbyte_at(payload, pos)
    for _ in range(count):
        n, pos = _varbyte_at(payload, pos)
        pos += n
    (aid,) = struct.unpack_from(">Q", payload, pos)
    return version, aid


def _varbyte_at(b, pos):
    value, shift = 0, 0
    while True:
        byte = b[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def client_handshake(rng, flags=0, version_field=0):
    payload = node_id(rng)
    return HEADER.pack(CLIENT_HANDSHAKE, 0, 0, flags, len(payload), version_field, 0, 0) + payload


def closed_within(s, seconds):
    """Seconds until the peer closed `s` (reading and dropping what it
    sends), or None if it was still open after `seconds`."""
    start = time.monotonic()
    s.setblocking(False)
    while True:
        left = seconds - (time.monotonic() - start)
        if left <= 0:
            return None
        r, _, _ = select.select([s], [], [], min(left, 0.5))
        if r:
            try:
                if not s.recv(65536):
                    return round(time.monotonic() - start, 2)
            except (ConnectionResetError, BrokenPipeError):
                return round(time.monotonic() - start, 2)
            except BlockingIOError:
                pass


def hold_many(args, count, send=None, interval=None, hold=10.0, first=None, probe=None):
    """Opens `count` connections; sends first(i) on connection i if given;
    optionally sends `send` a byte at a time every `interval` s on each;
    holds them up to `hold` s. Returns when each was closed by the peer
    (None: still open), what each received and each one's local port.

    With `send` and `interval`, each connection gets its first byte as it
    opens, so that none looks silent to the target while the rest open.
    `probe` (bytes): sent on one more connection once all are open, when the
    target has them all queued before it; what came back is in "probe", and
    the hold ends a second after it is answered."""
    socks, opened_at, closed_at, got, ports = [], [], [], [], []
    failed = 0
    trickle = send is not None and interval is not None
    for i in range(count):
        try:
            s = connect(args)
            ports.append(s.getsockname()[1])
            if first is not None:
                s.sendall(first(i))
            if trickle:
                s.sendall(send[:1])
            socks.append(s)
            opened_at.append(time.monotonic())
            closed_at.append(None)
            got.append(b"")
        except OSError:
            failed += 1
    for s in socks:
        s.setblocking(False)
    start = time.monotonic()
    sent = 1 if trickle else 0
    next_byte = start + (interval or 0)
    probe_sock, probe_got, probe_closed = None, b"", None
    if probe is not None:
        try:
            probe_sock = connect(args)
            probe_sock.sendall(probe)
            probe_sock.setblocking(False)
        except OSError as e:
            probe_got = type(e).__name__.encode()
    while time.monotonic() - start < hold:
        if probe_sock is not None and probe_closed is None:
            try:
                chunk = probe_sock.recv(65536)
            except BlockingIOError:
                chunk = None
            except OSError:
                chunk = b""
            if chunk:
                probe_got += chunk
            elif chunk is not None:
                probe_closed = round(time.monotonic() - start, 2)
        if probe_closed is not None and time.monotonic() - start > probe_closed + 1.0:
            break  # answered: a second more for the answers already sent to the rest
        now = time.monotonic()
        if send is not None and interval is not None and now >= next_byte and sent < len(send):
            for i, s in enumerate(socks):
                if closed_at[i] is None:
                    try:
                        s.send(send[sent:sent + 1])
                    except OSError:
                        closed_at[i] = round(now - opened_at[i], 2)
            sent += 1
            next_byte = now + interval
        live = [s for i, s in enumerate(socks) if closed_at[i] is None]
        if not live:
            break
        r, _, _ = select.select(live, [], [], 0.1)
        for s in r:
            i = socks.index(s)
            try:
                data = s.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                data = b""
            except BlockingIOError:
                continue
            if data:
                got[i] += data
            else:
                closed_at[i] = round(time.monotonic() - opened_at[i], 2)
    for s in socks:
        s.close()
    out = {"opened": len(socks), "connect_failed": failed, "closed_at": closed_at,
           "received": got, "bytes_sent_each": sent if send is not None else 0,
           "ports": ports}
    if probe is not None:
        if probe_sock is not None:
            probe_sock.close()
        out["probe"] = {"received": probe_got, "closed_at": probe_closed}
    return out


# ---- BASP ----------------------------------------------------------------


def basp_random(args):
    rng = random.Random(args.seed)
    out = {"connections": args.count, "seed": args.seed, "accepted_headers": [], "closed_at": []}
    for i in range(args.count):
        garbage = bytes(rng.randrange(256) for _ in range(args.bytes))
        op, _, _, _, length, data, src, dst = HEADER.unpack(garbage[:32])
        # header.cpp valid(): which garbage CAF 0.17.6 takes for a header
        if (op == 0 and data) or (op in (2, 3) and dst and length):
            out["accepted_headers"].append({"connection": i, "operation": op, "payload_len": length})
        s = connect(args)
        try:
            s.sendall(garbage)
        except OSError:
            pass  # the peer may close before it has read everything
        out["closed_at"].append(closed_within(s, args.hold))
        s.close()
    return out


def basp_truncated(args):
    rng = random.Random(args.seed)
    out = {}
    # a header cut after 20 of its 32 bytes, then the sender goes away
    s = connect(args)
    server_handshake(s)
    s.sendall(client_handshake(rng)[:20])
    s.close()
    # a client handshake whose payload (a node id) stops half-way; then
    # the sender waits: does the target ever drop it?
    s = connect(args)
    server_handshake(s)
    frame = client_handshake(rng)
    s.sendall(frame[:32 + 10])
    out["half_payload_closed_at"] = closed_within(s, args.hold)
    s.close()
    # a header that announces more payload than the frame carries, then the
    # next header's bytes: the target reads them as payload, then garbage
    s = connect(args)
    server_handshake(s)
    head = HEADER.pack(CLIENT_HANDSHAKE, 0, 0, 0, 64, 0, 0, 0)
    s.sendall(head + node_id(rng) + b"\xff" * 32 + b"\x09" * 32)
    out["overlong_claim_closed_at"] = closed_within(s, args.hold)
    s.close()
    return out


def basp_oversized(args):
    """A direct message header (valid by header.cpp: destination and payload
    length non-zero) announcing `claim` bytes, then nothing more. Sent on
    connect, before the server handshake: CAF reads it all the same, and a
    TLS port gets it as its first bytes."""
    s = connect(args)
    s.sendall(HEADER.pack(DIRECT_MESSAGE, 0, 0, 0, args.claim, 0, 0, 1))
    out = {"claimed": args.claim, "closed_at": closed_within(s, args.hold)}
    s.close()
    return out


def basp_silent(args):
    r = hold_many(args, args.count, hold=args.hold)
    return {"opened": r["opened"], "connect_failed": r["connect_failed"],
            "closed": sum(c is not None for c in r["closed_at"]),
            "closed_at_max": max([c for c in r["closed_at"] if c is not None], default=None),
            # the acceptor writes its server handshake first, silent or not
            "got_server_handshake": sum(len(g) >= 32 and g[0] == SERVER_HANDSHAKE
                                        for g in r["received"])}


def basp_slow(args):
    rng = random.Random(args.seed)
    r = hold_many(args, args.count, send=client_handshake(rng), interval=args.interval,
                  hold=args.hold)
    return {"opened": r["opened"], "interval": args.interval,
            "bytes_sent_each": r["bytes_sent_each"],
            "closed": sum(c is not None for c in r["closed_at"]),
            "closed_at": r["closed_at"]}


def basp_many(args):
    """`count` connections at once, each reading its server handshake."""
    results = [None] * args.count
    barrier = threading.Barrier(args.count)

    def one(i):
        try:
            barrier.wait(timeout=30)
            s = connect(args, timeout=30)
            try:
                server_handshake(s)
                results[i] = "handshake"
                hold_until.wait(args.hold)
            finally:
                s.close()
        except Exception as e:  # noqa: BLE001 -- reported, not raised
            results[i] = type(e).__name__

    hold_until = threading.Event()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(args.count)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while sum(r is not None for r in results) < args.count and time.monotonic() < deadline:
        time.sleep(0.05)
    answered = sum(r == "handshake" for r in results)
    hold_until.set()
    for t in threads:
        t.join()
    failures = {}
    for r in results:
        if r != "handshake":
            failures[r] = failures.get(r, 0) + 1
    return {"connections": args.count, "server_handshakes": answered, "failures": failures}


def basp_old(args):
    """Older peers: a BASP peer that sends a server handshake of BASP
    version 2 in place of a client handshake; a client handshake whose node
    id has the pre-0.17 layout (no implementation atom); and, after a proper
    handshake, a message of another salamander protocol: to a node,
    hello(protocol - 1) (it must refuse, naming both versions); to anything
    else, join with a name and no actor (a shape the interface lacks)."""
    rng = random.Random(args.seed)
    out = {}
    s = connect(args)
    server_handshake(s)
    payload = node_id(rng) + varbyte(1) + cstring("generic-caf-app") + struct.pack(">Q", 0) + varbyte(0)
    s.sendall(HEADER.pack(SERVER_HANDSHAKE, 0, 0, 0, len(payload), 2, 0, 0) + payload)
    out["basp_v2_handshake_closed_at"] = closed_within(s, args.hold)
    s.close()
    s = connect(args)
    server_handshake(s)
    legacy = struct.pack(">I", 4242) + bytes(rng.randrange(1, 256) for _ in range(20))
    s.sendall(HEADER.pack(CLIENT_HANDSHAKE, 0, 0, 0, len(legacy), 0, 0, 0) + legacy)
    out["legacy_node_id_closed_at"] = closed_within(s, args.hold)
    s.close()
    s = connect(args)
    _, aid = server_handshake(s)
    s.sendall(client_handshake(rng))
    if args.protocol is not None:
        msg = message(("@atom", "hello"), ("@u32", args.protocol - 1), ("@str", ""))
    else:
        msg = message(("@atom", "join"), ("@str", "old-node"))
    payload = varbyte(0) + msg  # empty forwarding stack, then the message
    request_id = (1 << 60) | 7  # a normal-category request
    s.sendall(HEADER.pack(DIRECT_MESSAGE, 0, 0, 0, len(payload), request_id, 1, aid) + payload)
    reply = None
    deadline = time.monotonic() + args.hold
    try:
        while time.monotonic() < deadline and reply is None:
            (op, _, _, _, _, data, _, dst), body = read_frame(s, timeout=deadline - time.monotonic())
            if op == DIRECT_MESSAGE and dst == 1:
                reply = body
    except (OSError, ConnectionError) as e:
        out["reply_error"] = str(e)
    s.close()
    out["reply"] = None if reply is None else reply.decode("latin-1")
    return out


# ---- TLS -----------------------------------------------------------------
#
# A port of a process run with --tls reads nothing but TLS, and a peer
# without a certificate of the cluster's CA never gets past the handshake.
# So every connection here must be closed by the target: "refused" ones at
# once (bytes that are not TLS, lengths past TLS's limits, a protocol
# version the target does not speak), "bound" ones when the target's
# handshake deadline cuts them (a peer that stops or crawls mid-handshake).


def client_hello(minimum=None, maximum=None, ciphers=None):
    """The bytes of a ClientHello that Python's OpenSSL would send (no
    certificate: this peer has none to give when asked for one)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if ciphers:
        ctx.set_ciphers(ciphers)
    if minimum is not None:
        ctx.minimum_version = minimum
    if maximum is not None:
        ctx.maximum_version = maximum
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_side=False)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def tls_record(content_type, body, version=0x0301):
    return struct.pack(">BHH", content_type, version, len(body)) + body


def tls_one(args, name, data, expect):
    """One connection: sends `data`, stays until the target closes it (or
    args.hold s); what happened, for the connection list."""
    s = connect(args)
    port = s.getsockname()[1]
    try:
        s.sendall(data)
    except OSError:
        pass  # closed before it read everything: closed_within says when
    start = time.monotonic()
    first = b""
    closed = None
    try:
        s.settimeout(args.hold)
        first = s.recv(5)
        if not first:
            closed = round(time.monotonic() - start, 2)
    except ConnectionResetError:
        closed = round(time.monotonic() - start, 2)
    except socket.timeout:
        pass
    if closed is None and first:
        left = closed_within(s, max(0.0, args.hold - (time.monotonic() - start)))
        if left is not None:
            closed = round(time.monotonic() - start, 2)
    s.close()
    return {"name": name, "port": port, "closed_at": closed, "expect": expect,
            "first_bytes": first.hex()}


def tls_many_result(r, name, expect):
    return [{"name": name, "port": p, "closed_at": c, "expect": expect,
             "first_bytes": g[:5].hex()}
            for p, c, g in zip(r["ports"], r["closed_at"], r["received"])]


def tls_random(args):
    rng = random.Random(args.seed)
    conns = [tls_one(args, "random %d" % i, bytes(rng.randrange(256) for _ in range(args.bytes)),
                     "refused")
             for i in range(args.count)]
    return {"conns": conns}


def tls_truncated(args):
    rng = random.Random(args.seed)
    hello = client_hello()
    conns = [
        # plaintext BASP, cut short, as a node or console without --tls would
        tls_one(args, "BASP header cut at 20 of 32 bytes", client_handshake(rng)[:20], "refused"),
        tls_one(args, "BASP handshake cut in its payload", client_handshake(rng)[:42], "refused"),
        # TLS that stops: the target waits for the rest, until its deadline
        tls_one(args, "ClientHello record header only", hello[:5], "bound"),
        tls_one(args, "ClientHello cut in half", hello[:len(hello) // 2], "bound"),
    ]
    return {"hello_bytes": len(hello), "conns": conns}


def tls_oversized(args):
    """Lengths no TLS peer may send; each must be refused from its header,
    without reading (or allocating) what it announces."""
    conns = [
        tls_one(args, "BASP header announcing %d bytes" % args.claim,
                HEADER.pack(DIRECT_MESSAGE, 0, 0, 0, args.claim, 0, 0, 1), "refused"),
        # a record of 64 KiB - 1 (TLS allows 16 KiB + 2 KiB), its header and 1 KiB
        tls_one(args, "TLS record announcing 65535 bytes",
                struct.pack(">BHH", 22, 0x0301, 0xFFFF) + b"\x01" * 1024, "refused"),
        # a ClientHello announcing 16 MiB - 1 in one small record
        tls_one(args, "ClientHello announcing 16 MiB",
                tls_record(22, b"\x01\xff\xff\xff" + b"\x03\x03" + b"\x00" * 32), "refused"),
    ]
    return {"conns": conns}


def tls_silent(args):
    r = hold_many(args, args.count, hold=args.hold)
    return {"opened": r["opened"], "connect_failed": r["connect_failed"],
            "conns": tls_many_result(r, "silent", "bound")}


def tls_slow(args):
    hello = client_hello()
    r = hold_many(args, args.count, send=hello, interval=args.interval, hold=args.hold)
    return {"opened": r["opened"], "interval": args.interval, "hello_bytes": len(hello),
            "bytes_sent_each": r["bytes_sent_each"],
            "conns": tls_many_result(r, "a ClientHello a byte at a time", "bound")}


def tls_many(args):
    """`count` connections held at once, each sending a whole ClientHello
    and then nothing: the target answers each with its ServerHello (a record
    of type 22) and waits for a certificate that never comes."""
    hellos = [client_hello() for _ in range(min(args.count, 16))]
    r = hold_many(args, args.count, hold=args.hold, first=lambda i: hellos[i % len(hellos)])
    return {"opened": r["opened"], "connect_failed": r["connect_failed"],
            "server_hellos": sum(g[:1] == b"\x16" for g in r["received"]),
            "conns": tls_many_result(r, "ClientHello, then silence", "bound")}


def tls_old(args):
    """Older peers: BASP version 2 in plaintext, an SSLv2-format hello, TLS
    1.0 and TLS 1.2 hellos (the target speaks TLS 1.3 only, or refuses them
    when it asks for a certificate that does not come)."""
    rng = random.Random(args.seed)
    payload = node_id(rng) + varbyte(1) + cstring("generic-caf-app") + struct.pack(">Q", 0) + varbyte(0)
    sslv2 = bytes.fromhex("802e0103010015000000100100800300800700c006004000400200800000"
                          "04000005000a") + bytes(rng.randrange(256) for _ in range(16))
    conns = [
        tls_one(args, "BASP version 2 server handshake",
                HEADER.pack(SERVER_HANDSHAKE, 0, 0, 0, len(payload), 2, 0, 0) + payload, "refused"),
        tls_one(args, "SSLv2-format ClientHello", sslv2, "refused"),
        tls_one(args, "TLS 1.0 ClientHello",
                client_hello(ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1, "DEFAULT:@SECLEVEL=0"),
                "refused"),
    ]
    tls12 = tls_one(args, "TLS 1.2 ClientHello",
                    client_hello(ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2), "refused")
    # a target that speaks TLS 1.2 answers with a ServerHello and waits for
    # a certificate: then its deadline ends it
    if tls12["first_bytes"][:2] == "16":
        tls12["expect"] = "bound"
    conns.append(tls12)
    return {"conns": conns}


# ---- HTTP ----------------------------------------------------------------


def http_exchange(args, raw, timeout=30.0, close_write=False):
    """Sends raw bytes; the status code of the answer (None: none) and its text."""
    s = connect(args, timeout=timeout)
    try:
        s.sendall(raw)
        if close_write:
            s.shutdown(socket.SHUT_WR)
        data = b""
        s.settimeout(timeout)
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            data += chunk
            if _complete(data):
                break
    finally:
        s.close()
    return _status(data), data.decode("latin-1")


def _complete(data):
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            return len(body) >= int(v.strip())
    return False


def _status(data):
    try:
        return int(data.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None


def infer_body(args):
    sample = 1
    for d in args.input_shape:
        sample *= d
    return json.dumps({"inputs": [{"name": "input", "shape": [1] + args.input_shape,
                                   "datatype": "FP32", "data": [0.5] * sample}]}).encode()


def post(path, body, version="HTTP/1.1", extra=""):
    return ("POST %s %s\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n%s\r\n" % (path, version, len(body), extra)).encode() + body


def http_random(args):
    rng = random.Random(args.seed)
    statuses = []
    for _ in range(args.count):
        garbage = bytes(rng.randrange(256) for _ in range(args.bytes))
        statuses.append(http_exchange(args, garbage, timeout=args.hold, close_write=True)[0])
    return {"connections": args.count, "seed": args.seed, "statuses": statuses}


def http_truncated(args):
    path = "/v2/models/%s/infer" % args.model
    body = infer_body(args)
    out = {}
    # a request line cut short, then the client goes away
    s = connect(args)
    s.sendall(b"POST /v2/models/%s/inf" % args.model.encode())
    s.close()
    # headers announce the whole body; half of it comes; the client leaves
    s = connect(args)
    s.sendall(post(path, body)[: len(post(path, b"")) + len(body) // 2])
    s.close()
    # the same, but the client stays: the server must give up on it
    s = connect(args)
    s.sendall(post(path, body)[: len(post(path, b"")) + len(body) // 2])
    out["half_body_closed_at"] = closed_within(s, args.hold)
    s.close()
    # headers that stop in the middle of a line, client stays
    s = connect(args)
    s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Le" % path.encode())
    out["half_header_closed_at"] = closed_within(s, args.hold)
    s.close()
    return out


def http_oversized(args):
    path = "/v2/models/%s/infer" % args.model
    limit = args.max_body_mb * 1024 * 1024
    out = {}
    # a body far over the limit, sent for real: the answer is 413, early
    size = 8 * limit
    s = connect(args, timeout=30)
    s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               "Content-Length: %d\r\n\r\n" % (path, size)).encode())
    sent, chunk, data = 0, b"[" + b"0.5," * 16383 + b"0", b""
    s.settimeout(0.0)
    start = time.monotonic()
    while sent < size and time.monotonic() - start < 60:
        try:
            sent += s.send(chunk[: size - sent])
        except BlockingIOError:
            time.sleep(0.01)
        except OSError:
            break
        try:
            got = s.recv(65536)
            if not got:
                break
            data += got
            if _complete(data):
                break
        except (BlockingIOError, ConnectionResetError):
            pass
    s.settimeout(10)
    try:
        while not _complete(data):
            got = s.recv(65536)
            if not got:
                break
            data += got
    except OSError:
        pass
    s.close()
    out["real_body"] = {"size": size, "sent_before_answer": sent, "status": _status(data)}
    # absurd lengths: nothing follows the headers
    for claim in ("1000000000000000000", "99999999999999999999999999", "-1"):
        raw = ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %s\r\n\r\n" % (path, claim)).encode()
        t = time.monotonic()
        status, _ = http_exchange(args, raw, timeout=30)
        out["content_length_" + claim] = {"status": status, "seconds": round(time.monotonic() - t, 2)}
    # Expect: 100-continue over the limit: 413 in place of the 100
    raw = ("POST %s HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n"
           % (path, size)).encode()
    status, _ = http_exchange(args, raw, timeout=30)
    out["expect_100"] = {"status": status}
    # chunked, past the limit: counted as it arrives
    raw = ("POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" % path).encode()
    piece = b"%x\r\n%s\r\n" % (65536, b"1" * 65536)
    s = connect(args, timeout=30)
    s.sendall(raw)
    status, data = None, b""
    try:
        for _ in range(4 * limit // 65536):
            s.sendall(piece)
    except OSError:
        pass
    s.settimeout(10)
    try:
        while not _complete(data):
            got = s.recv(65536)
            if not got:
                break
            data += got
    except OSError:
        pass
    s.close()
    out["chunked"] = {"status": _status(data)}
    # a body without a length (read-until-close in HTTP/1.0 style)
    raw = ("POST %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode() + b"[0.5" + b",0.5" * 1000
    out["no_length"] = {"status": http_exchange(args, raw, timeout=30)[0]}
    # one header line of 1 MiB
    raw = ("GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n" % ("a" * (1 << 20))).encode()
    try:
        out["huge_header"] = {"status": http_exchange(args, raw, timeout=30)[0]}
    except OSError as e:
        out["huge_header"] = {"status": None, "error": type(e).__name__}
    return out


def http_silent(args):
    r = hold_many(args, args.count, hold=args.hold)
    return {"opened": r["opened"], "connect_failed": r["connect_failed"],
            "closed": sum(c is not None for c in r["closed_at"]),
            "closed_at_max": max([c for c in r["closed_at"] if c is not None], default=None),
            "statuses": sorted({_status(g) for g in r["received"]} - {None})}


def http_slow(args):
    body = infer_body(args)
    probe = b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    r = hold_many(args, args.count, send=post("/v2/models/%s/infer" % args.model, body),
                  interval=args.interval, hold=args.hold, probe=probe if args.probe else None)
    out = {"opened": r["opened"], "connect_failed": r["connect_failed"],
           "interval": args.interval,
           "closed": sum(c is not None for c in r["closed_at"]),
           "closed_at": r["closed_at"],
           "statuses": [_status(g) for g in r["received"]]}
    if args.probe:
        got = r["probe"]["received"]
        head = got.partition(b"\r\n\r\n")[0].decode("latin-1")
        retry = re.search(r"(?im)^retry-after:\s*(\S+)", head)
        out["probe"] = {"status": _status(got), "retry_after": retry.group(1) if retry else None,
                        "closed_at": r["probe"]["closed_at"]}
    return out


def http_many(args):
    """`count` connections at once, each asking GET /v2/health/live as soon
    as it is connected: one thread, non-blocking sockets (threads would
    leave a connected socket waiting seconds for the interpreter lock, and
    the server rightly closes a connection that sends nothing)."""
    request = b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    sel = selectors.DefaultSelector()
    got, results = {}, {}
    for i in range(args.count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect((args.host, args.port))
        except BlockingIOError:
            pass
        except OSError as e:
            results[i] = type(e).__name__
            s.close()
            continue
        got[i] = b""
        sel.register(s, selectors.EVENT_WRITE, i)
    deadline = time.monotonic() + 60
    while len(results) < args.count and time.monotonic() < deadline:
        for key, events in sel.select(timeout=1.0):
            s, i = key.fileobj, key.data
            try:
                if events & selectors.EVENT_WRITE:
                    s.sendall(request)  # a few bytes into an empty buffer
                    sel.modify(s, selectors.EVENT_READ, i)
                    continue
                chunk = s.recv(65536)
            except OSError as e:
                chunk, results[i] = b"", type(e).__name__
            if chunk:
                got[i] += chunk
                if not _complete(got[i]):
                    continue
            results.setdefault(i, _status(got[i]))
            sel.unregister(s)
            s.close()
    for key in list(sel.get_map().values()):
        results.setdefault(key.data, "no answer in 60 s")
        key.fileobj.close()
    counts = {}
    for r in results.values():
        counts[str(r)] = counts.get(str(r), 0) + 1
    return {"connections": args.count, "answers": counts}


def http_old(args):
    body = infer_body(args)
    out = {}
    status, text = http_exchange(args, post("/v2/models/%s/infer" % args.model, body,
                                            version="HTTP/1.0"))
    out["http10_infer"] = {"status": status, "body": text.partition("\r\n\r\n")[2]}
    status, _ = http_exchange(args, b"GET /v2/health/live HTTP/1.0\r\n\r\n")
    out["http10_get_no_host"] = status
    status, text = http_exchange(args, post("/v1/models/%s:predict" % args.model,
                                            b'{"instances": [[0.5]]}'))
    out["v1_predict"] = {"status": status, "body": text.partition("\r\n\r\n")[2]}
    status, text = http_exchange(args, b"GET /v2/health/live\r\n\r\n", close_write=True)
    out["http09"] = status
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("proto", choices=["basp", "tls", "http"])
    p.add_argument("case", choices=["random", "truncated", "oversized", "silent", "slow", "many", "old"])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--count", type=int, default=20, help="connections")
    p.add_argument("--bytes", type=int, default=4096, help="random bytes a connection")
    p.add_argument("--hold", type=float, default=10.0, help="longest wait for the target, s")
    p.add_argument("--interval", type=float, default=0.3, help="slow: seconds between bytes")
    p.add_argument("--probe", action="store_true",
                   help="http slow: once all are open, one GET more; its status in \"probe\"")
    p.add_argument("--claim", type=int, default=0xFFFFFFFF, help="oversized: payload_len")
    p.add_argument("--protocol", type=int, help="old: the target's salamander protocol (a node)")
    p.add_argument("--model", default="mlp", help="http: the served model's name")
    p.add_argument("--input-shape", default="1,28,28", help="http: one sample's shape")
    p.add_argument("--max-body-mb", type=int, default=1, help="http: the server's --max-body-mb")
    args = p.parse_args()
    args.input_shape = [int(x) for x in args.input_shape.split(",")]
    case = globals()["%s_%s" % (args.proto, args.case)]
    try:
        out = case(args)
    except (OSError, ConnectionError) as e:
        print(json.dumps({"error": "%s: %s" % (type(e).__name__, e)}))
        return 2
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
