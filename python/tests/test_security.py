"""The client against a gateway that requires a bearer token, over TLS."""

import os
import shutil
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import free_port, gateway, rank_at  # noqa: E402

import brand  # noqa: E402


@unittest.skipUnless(shutil.which("openssl"), "needs openssl to make a certificate")
class TestTokenAndTLS(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        gw = gateway()
        cls.tmp = os.path.join(gw.tmp, "secure")
        os.makedirs(cls.tmp)
        cls.cert, cls.key = os.path.join(cls.tmp, "cert.pem"), os.path.join(cls.tmp, "key.pem")
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", cls.key, "-out", cls.cert, "-days", "1", "-subj", "/CN=localhost",
             "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
            check=True, timeout=60, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        tokens = os.path.join(cls.tmp, "tokens")
        with open(tokens, "w") as f:
            f.write("# test\nsecret-token\n")
        port = free_port()
        cls.url = f"https://127.0.0.1:{port}"
        cls.log = open(os.path.join(cls.tmp, "serve.log"), "wb")
        cls.proc = subprocess.Popen(
            [gw.binary, "serve", "--dataset", "t=" + os.path.join(gw.tmp, "store"), "--listen", f"127.0.0.1:{port}",
             "--cache-size", "32MiB", "--cache-prefault=false", "--window", "2", "--log-format", "json",
             "--tls-cert", cls.cert, "--tls-key", cls.key, "--auth-token-file", tokens, "--shutdown-timeout", "1s"],
            stdout=cls.log, stderr=subprocess.STDOUT,
        )
        c = brand.Client(cls.url, ca_file=cls.cert, max_retries=40, backoff=0.05, max_backoff=0.25)
        try:
            c.get("/readyz")  # retried until the gateway listens
        finally:
            c.close()

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        cls.proc.wait(10)
        cls.log.close()

    def test_token_over_tls(self):
        with brand.Client(self.url, token="secret-token", ca_file=self.cert, batch_size=10, window=2) as c:
            n = sum(len(b) for b in c.epoch(0))
        self.assertEqual(n, gateway().samples)

    def test_no_token(self):
        with brand.Client(self.url, ca_file=self.cert, batch_size=10, max_retries=0) as c:
            with self.assertRaises(brand.BrandError) as cm:
                c.batch(0, 0)
        self.assertEqual(cm.exception.status, 401)

    def test_wrong_token_not_shown(self):
        with brand.Client(self.url, token="wrong-token", ca_file=self.cert, batch_size=10, max_retries=0) as c:
            with self.assertRaises(brand.BrandError) as cm:
                c.batch(0, 0)
        self.assertEqual(cm.exception.status, 401)
        self.assertNotIn("wrong-token", str(cm.exception))

    def test_untrusted_certificate(self):
        with brand.Client(self.url, token="secret-token", batch_size=10, max_retries=0) as c:
            with self.assertRaises(brand.BrandConnectionError):
                c.batch(0, 0)

    def test_silent_home_over_tls(self):
        # A home that completes TCP handshakes and nothing more: the client's
        # TLS handshake gets no answer, and neither does the probe.
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        self.addCleanup(s.close)
        silent = f"https://127.0.0.1:{s.getsockname()[1]}"
        with brand.Client("", peers=[silent, self.url], world=2, rank=rank_at([silent, self.url], silent),
                          token="secret-token", ca_file=self.cert,
                          batch_size=10, timeout=30) as c:
            t0 = time.monotonic()
            self.assertEqual(len(c.batch(0, 0)), 10)
            took = time.monotonic() - t0
            self.assertEqual(c.served, {self.url: 1})
        self.assertLess(took, 8, f"the batch took {took:.1f} s")


if __name__ == "__main__":
    unittest.main()
