"""The addresses the server listens on: whether it can, checked before the model loads, and
the one message that says it cannot."""

import socket

from elmo_tf.errors import ListenError


def cannot_listen(host, port, what, option):
    return (
        f"cannot listen on {host}:{port} ({what}, {option}): the port is in use or the address "
        "is not this machine's; give another port, or 0 for any free one"
    )


def check_can_listen(host, port, rest_port=None):
    """``ListenError`` unless ``host`` can listen on ``port`` (gRPC) and ``rest_port``: a
    port in use, an address not this machine's, or the same port twice are named in seconds,
    before the model loads. The ports are bound and let go at once (another process may
    still take one before the server binds it: the server's own bind then says so)."""
    if rest_port is not None and port != 0 and rest_port == port:
        raise ListenError(f"--port and --rest-port are both {port}: gRPC and REST need a port each")
    for number, what, option in [(port, "gRPC", "port"), (rest_port, "REST", "rest_port")]:
        if number is None or number == 0:
            continue
        reason = _bind_problem(host, number)
        if reason is not None:
            raise ListenError(f"{cannot_listen(host, number, what, option)} ({reason})")


def _bind_problem(host, port):
    """Why no address of ``host`` (``[v6]``, a name, ``""`` for every interface) can be
    bound on ``port``, or ``None`` when one can (the servers bind every address a name has)."""
    name = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        infos = socket.getaddrinfo(
            name or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except (OSError, UnicodeError, OverflowError) as e:
        return getattr(e, "strerror", None) or str(e)
    reason = "no address"
    for family, kind, proto, _, address in infos:
        try:
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind(address)
            return None
        except OSError as e:
            reason = e.strerror or str(e)
    return reason
