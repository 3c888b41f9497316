"""The cluster network of the fake's pods: NetworkPolicies and a small CNI.

``PodNetwork`` says which ports of the controller a pod may reach, as the NetworkPolicies
of its namespace (egress) and of the controller's (ingress) combine. ``wire_network``
plays the CNI for the chroot runtime: the pod's main container gets ``lo`` and an ``eth0``
on a network of its own, where the controller's address answers on exactly those ports,
each forwarded to the same port on the host's ``controller_host``.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dataspace.testing.fake_k8s.store import Pod


@dataclass(frozen=True, kw_only=True)
class PodNetwork:
    """The cluster network as the fake's pods see it, with NetworkPolicies enforced.

    Attributes:
        policies: NetworkPolicy objects (e.g. the documents of ``k8s/base/*.yaml``).
        controller_address: the controller pod's IP as the sandbox pods dial it.
        controller_namespace: the controller pod's namespace.
        controller_labels: the controller pod's labels.
        controller_host: where the controller's listeners are on this host.
        end_port: the CNI honours ``endPort``; False: a CNI that ignores it (a rule with
            a port range opens its first port alone, as such CNIs do).
    """

    policies: tuple[Mapping[str, Any], ...]
    controller_address: str = "10.244.0.1"
    controller_namespace: str = "dataspace"
    controller_labels: Mapping[str, str] = field(
        default_factory=lambda: {"app.kubernetes.io/component": "controller"}
    )
    controller_host: str = "127.0.0.1"
    end_port: bool = True

    def allowed_ports(self, namespace: str, labels: Mapping[str, str]) -> set[int]:
        """TCP ports of the controller a pod may connect to.

        Its namespace's egress rules and the controller namespace's ingress rules, both
        as NetworkPolicies combine.

        A pod no egress policy selects gets nothing: the fake models allowances only.
        """
        egress = self._rules("Egress", namespace, labels) or []
        peer_ns, peer = self.controller_namespace, dict(self.controller_labels)
        out: set[int] = set()
        for rule in egress:
            if _peer_matches(rule.get("to"), namespace, peer_ns, peer, self.controller_address):
                out |= _rule_ports(rule, self.end_port)
        ingress = self._rules("Ingress", peer_ns, peer)
        if ingress is not None:
            inbound: set[int] = set()
            for rule in ingress:
                if _peer_matches(rule.get("from"), peer_ns, namespace, labels, None):
                    inbound |= _rule_ports(rule, self.end_port)
            out &= inbound
        return out

    def _rules(
        self, kind: str, namespace: str, labels: Mapping[str, str]
    ) -> list[Mapping[str, Any]] | None:
        """The rules of ``kind`` that apply to a pod; None when no policy isolates it."""
        rules: list[Mapping[str, Any]] | None = None
        key = kind.lower()
        for pol in self.policies:
            if pol.get("kind") != "NetworkPolicy":
                continue
            if (pol.get("metadata") or {}).get("namespace") != namespace:
                continue
            spec = pol.get("spec") or {}
            types = spec.get("policyTypes") or (
                ["Ingress", "Egress"] if "egress" in spec else ["Ingress"]
            )
            if kind not in types or not _selects(spec.get("podSelector") or {}, labels):
                continue
            rules = [*(rules or []), *(spec.get(key) or [])]
        return rules


def _selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    if selector.get("matchExpressions"):
        raise ValueError("fake CNI: matchExpressions are not supported")
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def _peer_matches(
    peers: Any,
    policy_ns: str,
    namespace: str,
    labels: Mapping[str, str],
    address: str | None,
) -> bool:
    """Whether a rule's ``to``/``from`` list selects the pod (``namespace``, ``labels``)."""
    import ipaddress

    if peers is None:
        return True
    for peer in peers:
        if "ipBlock" in peer:
            if address is None:
                continue
            ip = ipaddress.ip_address(address)
            block = peer["ipBlock"]
            if ip in ipaddress.ip_network(block["cidr"]) and not any(
                ip in ipaddress.ip_network(x) for x in block.get("except") or []
            ):
                return True
            continue
        ns_sel, pod_sel = peer.get("namespaceSelector"), peer.get("podSelector")
        # without a namespaceSelector, a podSelector means the policy's own namespace
        ns_ok = (
            _selects(ns_sel, {"kubernetes.io/metadata.name": namespace})
            if ns_sel is not None
            else namespace == policy_ns
        )
        if ns_ok and (pod_sel is None or _selects(pod_sel, labels)):
            return True
    return False


def _rule_ports(rule: Mapping[str, Any], end_port: bool = True) -> set[int]:
    ports = rule.get("ports")
    if not ports:
        raise ValueError("fake CNI: a rule without ports (every port) is not supported")
    out: set[int] = set()
    for p in ports:
        if p.get("protocol", "TCP") != "TCP":
            continue
        if not isinstance(p.get("port"), int):
            raise ValueError(f"fake CNI: named or missing port in {p}")
        last = int(p.get("endPort", p["port"])) if end_port else p["port"]
        out |= set(range(p["port"], last + 1))
    return out


def wire_network(net: PodNetwork, pod: Pod, ns_pid: int, alive: Callable[[Pod], bool]) -> None:
    """Bring ``lo`` up; with allowed ports, link the pod to a network of its own.

    There the controller's address forwards exactly those ports to the host's
    listeners.
    """
    meta = pod.obj["metadata"]
    ports = net.allowed_ports(meta["namespace"], meta.get("labels") or {})
    _in_netns(ns_pid, ["ip", "link", "set", "lo", "up"])
    if not ports:
        return
    holder = subprocess.Popen(
        ["unshare", "--net", "--", "sleep", "infinity"], start_new_session=True
    )
    pod.net_holder = holder
    own = os.readlink("/proc/self/ns/net")
    end = time.monotonic() + 10.0
    while os.readlink(f"/proc/{holder.pid}/ns/net") == own:
        if time.monotonic() > end or holder.poll() is not None:
            raise RuntimeError("fake CNI: the pod network's namespace did not start")
        time.sleep(0.005)
    ctl, pod_ip = net.controller_address, _pod_address(net.controller_address)
    _in_netns(
        holder.pid,
        [
            "ip",
            "link",
            "add",
            "eth0",
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            str(ns_pid),
        ],
    )
    _in_netns(holder.pid, ["ip", "addr", "add", f"{ctl}/24", "dev", "eth0"])
    _in_netns(holder.pid, ["ip", "link", "set", "eth0", "up"])
    _in_netns(ns_pid, ["ip", "addr", "add", f"{pod_ip}/24", "dev", "eth0"])
    _in_netns(ns_pid, ["ip", "link", "set", "eth0", "up"])
    made: list[socket.socket] = []

    def bind_all() -> None:  # in a thread of its own: setns changes only that thread
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/proc/{holder.pid}/ns/net", os.O_RDONLY)
        try:
            if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
                raise OSError(ctypes.get_errno(), "setns")
        finally:
            os.close(fd)
        for port in sorted(ports):
            lsock = socket.socket()
            lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            lsock.bind((ctl, port))
            lsock.listen(64)
            made.append(lsock)

    t = threading.Thread(target=bind_all, name="fake-cni-bind")
    t.start()
    t.join()
    pod.listeners.extend(made)
    threading.Thread(
        target=_forward_loop, args=(net, pod, list(made), alive), name="fake-cni", daemon=True
    ).start()


def _forward_loop(
    net: PodNetwork, pod: Pod, listeners: list[socket.socket], alive: Callable[[Pod], bool]
) -> None:
    sel = selectors.DefaultSelector()
    for lsock in listeners:
        sel.register(lsock, selectors.EVENT_READ)
    while alive(pod):
        try:
            ready = sel.select(timeout=0.2)
        except (OSError, ValueError):
            return
        for key, _ in ready:
            ready_sock = key.fileobj
            if not isinstance(ready_sock, socket.socket):
                continue
            try:
                conn, _ = ready_sock.accept()
            except OSError:
                continue
            port = ready_sock.getsockname()[1]
            threading.Thread(
                target=_splice, args=(conn, (net.controller_host, port)), daemon=True
            ).start()


def _in_netns(pid: int, argv: list[str]) -> None:
    subprocess.run(["nsenter", "-t", str(pid), "-n", "--", *argv], check=True, capture_output=True)


def _pod_address(controller: str) -> str:
    """The pod's own address on its small network (the controller's, plus one)."""
    import ipaddress

    return str(ipaddress.ip_address(controller) + 1)


def _splice(conn: socket.socket, target: tuple[str, int]) -> None:
    """Forward one accepted connection to ``target`` (a refused target closes it)."""
    try:
        up = socket.create_connection(target, timeout=10)
    except OSError:
        conn.close()
        return
    up.settimeout(None)

    def pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

    back = threading.Thread(target=pump, args=(up, conn), daemon=True)
    back.start()
    pump(conn, up)
    back.join()
    conn.close()
    up.close()


__all__ = ["PodNetwork", "wire_network"]
