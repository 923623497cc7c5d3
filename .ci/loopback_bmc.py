"""A BMC on loopback for the power tests and for trying power mode by hand (.ci/bmc-up.sh).

Two real protocol stacks, both bound to 127.0.0.1 only, both answering with the wattage in
WATTS_FILE (a number; rewrite it with os.replace to follow a step profile):

  IPMI 2.0 / RMCP+ (pyghmi's BMC server, cipher suite 3): DCMI Get Power Reading (netfn 0x2C,
      cmd 0x02, group 0xDC), what `ipmitool -I lanplus ... dcmi power reading` sends;
  Redfish (stdlib http.server): GET /redfish/v1/Chassis/1/Power (PowerControl[0]
      .PowerConsumedWatts) and /redfish/v1/Chassis/1/EnvironmentMetrics (PowerWatts.Reading),
      basic auth or a session from POST /redfish/v1/SessionService/Sessions.

Wrong credentials are refused by both (RAKP / HTTP 401).

    python .ci/loopback_bmc.py --ipmi-port 6230 --redfish-port 8230 --user admin \\
        --password-env BMC_PASSWORD --watts-file /tmp/w --ready-file /tmp/ready
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

DCMI_GROUP = 0xDC
NETFN_GROUP_EXT = 0x2C
CMD_GET_POWER_READING = 0x02


def read_watts(path: Path) -> int:
    try:
        return max(0, round(float(path.read_text().strip() or 0)))
    except (OSError, ValueError):
        return 0


def _ipmi_server(port: int, user: str, password: str, watts: Path):
    import pyghmi.ipmi.bmc as bmc

    class PowerBmc(bmc.Bmc):
        def handle_raw_request(self, request, session):
            if request["netfn"] == NETFN_GROUP_EXT and request["command"] == CMD_GET_POWER_READING:
                w = read_watts(watts)
                # cur, min, max, avg (W, u16 LE), timestamp (s, u32), period (ms, u32), state
                # 0x40 = power measurement active (DCMI 1.5 table 6-16)
                body = struct.pack("<HHHHIIB", w, w, w, w, int(time.time()), 1000, 0x40)
                return session.send_ipmi_response(data=[DCMI_GROUP, *body])
            return super().handle_raw_request(request, session)

        def get_power_state(self):
            return "on"

    return PowerBmc({user: password}, port=port, address="127.0.0.1")


def _redfish_server(port: int, user: str, password: str, watts: Path) -> ThreadingHTTPServer:
    sessions: set[str] = set()
    basic = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet: the tests read the sampler, not the server
            pass

        def _send(self, code: int, doc: dict, headers: dict | None = None):
            body = json.dumps(doc).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def _authorized(self) -> bool:
            return self.headers.get("Authorization") == basic or self.headers.get("X-Auth-Token") in sessions

        def do_GET(self):
            if self.path.rstrip("/") == "/redfish/v1":  # the service root needs no login
                return self._send(200, {"@odata.id": "/redfish/v1", "RedfishVersion": "1.15.0",
                                        "SessionService": {"@odata.id": "/redfish/v1/SessionService"},
                                        "Links": {"Sessions": {"@odata.id": "/redfish/v1/SessionService/Sessions"}}})  # fmt: skip
            if not self._authorized():
                return self._send(401, {"error": {"message": "authentication required"}})
            w = read_watts(watts)
            if self.path == "/redfish/v1/Chassis/1/Power":
                return self._send(200, {"@odata.id": self.path, "PowerControl": [{"PowerConsumedWatts": w}]})
            if self.path == "/redfish/v1/Chassis/1/EnvironmentMetrics":
                return self._send(200, {"@odata.id": self.path, "PowerWatts": {"Reading": w}})
            return self._send(404, {"error": {"message": f"no resource {self.path}"}})

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            doc = json.loads(self.rfile.read(length) or b"{}")
            if self.path.rstrip("/") != "/redfish/v1/SessionService/Sessions":
                return self._send(404, {"error": {"message": f"no resource {self.path}"}})
            if doc.get("UserName") != user or doc.get("Password") != password:
                return self._send(401, {"error": {"message": "invalid credentials"}})
            token = secrets.token_hex(16)
            sessions.add(token)
            loc = f"/redfish/v1/SessionService/Sessions/{token[:8]}"
            return self._send(201, {"@odata.id": loc}, {"X-Auth-Token": token, "Location": loc})

        def do_DELETE(self):
            self._send(204 if self._authorized() else 401, {})

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def server_bind(self):  # Nagle off: ~45 ms per GET with it, ~1-2 ms without
            import socket

            self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            super().server_bind()

    return Server(("127.0.0.1", port), Handler)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ipmi-port", type=int, default=0, help="UDP port for RMCP+ (0: no IPMI)")
    ap.add_argument("--redfish-port", type=int, default=0, help="TCP port for Redfish (0: no Redfish)")
    ap.add_argument("--user", default="admin")
    ap.add_argument("--password-env", default="BMC_PASSWORD", help="environment variable with the password")
    ap.add_argument("--watts-file", type=Path, required=True)
    ap.add_argument("--ready-file", type=Path, help="written once both servers listen")
    a = ap.parse_args()
    password = os.environ.get(a.password_env, "")
    if not password:
        print(f"loopback_bmc: set {a.password_env} (the password the BMC accepts)", flush=True)
        return 2
    if a.redfish_port:
        rf = _redfish_server(a.redfish_port, a.user, password, a.watts_file)
        threading.Thread(target=rf.serve_forever, daemon=True).start()
    ipmi = _ipmi_server(a.ipmi_port, a.user, password, a.watts_file) if a.ipmi_port else None
    if a.ready_file:
        tmp = a.ready_file.with_name(a.ready_file.name + ".tmp")
        tmp.write_text(str(os.getpid()))
        os.replace(tmp, a.ready_file)
    if ipmi is not None:
        ipmi.listen(timeout=1)  # serves until killed
    else:
        threading.Event().wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
