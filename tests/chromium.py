"""Headless Chromium driven over the DevTools protocol, with the standard library only.

``Browser`` starts ``chromium --headless`` on a page, speaks the protocol over a websocket
(a minimal client: text frames, masking, lengths up to 64 bits), clicks where an element is,
evaluates JavaScript, takes screenshots and looks at their pixels. Chromium comes from
Debian's ``chromium`` package; ``find_chromium`` installs it with apt-get only when
GRADGEN_INSTALL_CHROMIUM=1.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> tuple[str | None, str]:
    """The browser's path, or None and why there is none."""
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path, ""
    if os.environ.get("GRADGEN_INSTALL_CHROMIUM") != "1":
        return None, ("headless Chromium is not installed (apt-get install chromium, or set "
                      "GRADGEN_INSTALL_CHROMIUM=1 to let the tests install it)")
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        return None, "GRADGEN_INSTALL_CHROMIUM=1 needs root and apt-get to install chromium"
    result = subprocess.run("apt-get update -qq && apt-get install -y -qq chromium", shell=True,
                            capture_output=True, text=True, check=False, timeout=900)
    path = shutil.which("chromium")
    if path is None:
        return None, f"apt-get install chromium failed: {result.stderr.strip()[-300:]}"
    return path, ""


class _Socket:
    """A websocket client: enough of RFC 6455 for the DevTools protocol."""

    def __init__(self, url: str):
        match = re.match(r"ws://([^/:]+):(\d+)(/.*)", url)
        self.sock = socket.create_connection((match[1], int(match[2])), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (f"GET {match[3]} HTTP/1.1\r\nHost: {match[1]}:{match[2]}\r\n"
                   "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                   f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
        self.sock.sendall(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        assert b" 101 " in head.split(b"\r\n")[0], head

    def _exact(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the browser closed the connection")
            data += chunk
        return data

    def send(self, text: str) -> None:
        payload = text.encode()
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x81, 0x80 | n)
        elif n < 1 << 16:
            head = struct.pack("!BBH", 0x81, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def receive(self) -> str:
        parts = []
        while True:
            first, second = self._exact(2)
            n = second & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._exact(8))[0]
            data = self._exact(n)
            if first & 0x0F == 0x8:
                raise ConnectionError("the browser closed the websocket")
            if first & 0x0F in (0x1, 0x0):
                parts.append(data)
                if first & 0x80:
                    return b"".join(parts).decode()

    def close(self) -> None:
        self.sock.close()


class Browser:
    """``with Browser(path, url) as page:`` a headless Chromium showing ``url``."""

    def __init__(self, chromium: str, url: str, width: int = 1280, height: int = 900):
        self.profile = tempfile.mkdtemp(prefix="gradgen-chromium-")
        self.process = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
             f"--user-data-dir={self.profile}", f"--window-size={width},{height}",
             "--hide-scrollbars", url],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.next_id = 0
        self.ws = None
        try:
            port = self._port()
            deadline = time.monotonic() + 30
            while True:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list") as r:
                    pages = [t for t in json.load(r) if t["type"] == "page"]
                if pages or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            self.ws = _Socket(pages[0]["webSocketDebuggerUrl"])
            self.wait_for(f"location.href.startsWith({json.dumps(url.split('#')[0])}) && "
                          "document.readyState === 'complete'")
        except BaseException:
            self.close()
            raise

    def _port(self) -> int:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            match = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if match:
                return int(match[1])
            if not line and self.process.poll() is not None:
                break
        raise RuntimeError("chromium did not start its DevTools server")

    def call(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.receive())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"])
        return result["result"].get("value")

    def wait_for(self, condition: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while not self.evaluate(f"!!({condition})"):
            if time.monotonic() > deadline:
                raise TimeoutError(condition)
            time.sleep(0.05)

    def click(self, selector: str) -> None:
        """A real mouse click (press and release) at the middle of the element."""
        rect = self.evaluate(
            f"(function () {{ var e = document.querySelector({json.dumps(selector)});"
            "e.scrollIntoView({block: 'center'}); var r = e.getBoundingClientRect();"
            "return [r.left + Math.min(r.width / 2, 40), r.top + r.height / 2]; })()")
        x, y = rect
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left",
                      clickCount=1)

    def key(self, key: str, code: str, key_code: int) -> None:
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", type=kind, key=key, code=code,
                      windowsVirtualKeyCode=key_code)

    def resize(self, width: int, height: int, mobile: bool = False) -> None:
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=mobile)

    def colour_scheme(self, scheme: str) -> None:
        self.call("Emulation.setEmulatedMedia",
                  features=[{"name": "prefers-color-scheme", "value": scheme}])

    def pixels(self, png: bytes, colours: dict[str, str]) -> dict:
        """Look at a screenshot: its size, the share of pixels unlike its most common colour
        (the background), how many colours it has, and how many pixels have each of
        ``colours`` (name -> "#rrggbb"). The PNG is decoded by the browser (into a canvas)."""
        script = """(async function (data, wanted) {
          var img = new Image(); img.src = "data:image/png;base64," + data; await img.decode();
          var canvas = document.createElement("canvas");
          canvas.width = img.width; canvas.height = img.height;
          var ctx = canvas.getContext("2d"); ctx.drawImage(img, 0, 0);
          var px = ctx.getImageData(0, 0, img.width, img.height).data;
          var counts = new Map(), hits = {};
          Object.keys(wanted).forEach(function (k) { hits[k] = 0; });
          var targets = Object.keys(wanted).map(function (k) {
            var h = wanted[k]; return [k, parseInt(h.slice(1), 16)]; });
          for (var i = 0; i < px.length; i += 4) {
            var rgb = (px[i] << 16) | (px[i + 1] << 8) | px[i + 2];
            counts.set(rgb, (counts.get(rgb) || 0) + 1);
            for (var t = 0; t < targets.length; t++) {
              if (targets[t][1] === rgb) { hits[targets[t][0]] += 1; }
            }
          }
          var most = 0; counts.forEach(function (n) { if (n > most) { most = n; } });
          var total = px.length / 4;
          return {width: img.width, height: img.height, colours: counts.size,
                  content: 1 - most / total, hits: hits};
        })"""
        data = base64.b64encode(png).decode()
        return self.evaluate(f"{script}({json.dumps(data)}, {json.dumps(colours)})")

    def screenshot(self, path: str) -> bytes:
        data = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        with open(path, "wb") as fh:
            fh.write(data)
        return data

    def close(self) -> None:
        if self.ws is not None:
            self.ws.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stderr:
            self.process.stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
