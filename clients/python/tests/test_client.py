"""Tests of the client against the real avfs binary (AVFS_BIN, as the Go
end-to-end tests use it). Without AVFS_BIN they are skipped, except under
CI=true, where they fail."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from avfs import Avfs, AvfsError  # noqa: E402
from avfs.envelope import EXIT_NOT_RUN  # noqa: E402

AVFS_BIN = os.environ.get("AVFS_BIN", "")


def need_bin(test):
    if AVFS_BIN:
        return test
    if os.environ.get("CI") == "true":
        raise RuntimeError("AVFS_BIN is not set (CI=true: the client tests must run)")
    return unittest.skip("AVFS_BIN is not set")(test)


class _Home(unittest.TestCase):
    def setUp(self):
        # Keep the caller's AVFS_* (vault, server, config) out of the runs.
        self._saved = {k: v for k, v in os.environ.items() if k.startswith("AVFS_")}
        for k in self._saved:
            del os.environ[k]
        self.home = tempfile.mkdtemp(prefix="avfs-py-")
        self.avfs = Avfs(bin=AVFS_BIN, home=self.home)

    def tearDown(self):
        os.environ.update(self._saved)
        shutil.rmtree(self.home, ignore_errors=True)


@need_bin
class ClientTest(_Home):
    def test_exec_allow_with_checkpoint_and_changes(self):
        env = self.avfs.exec(shell="echo hello > a.txt; cat a.txt")
        self.assertEqual(env.decision, "allow_with_checkpoint", env.raw)
        self.assertEqual(env.exit_status, 0)
        self.assertIsNone(env.error)
        self.assertEqual(env.process.exit_code, 0)
        self.assertEqual(env.process.stdout_data(), b"hello\n")
        self.assertIsNotNone(env.checkpoint)
        self.assertEqual([(c.path, c.op, c.kind) for c in env.changes], [("/a.txt", "added", "file")])
        self.assertEqual(env.changes_total, 1)

        cps = self.avfs.checkpoint_list()
        self.assertIn(env.checkpoint.id, [c["id"] for c in cps])
        # Restoring the checkpoint taken before the run removes a.txt.
        self.avfs.checkpoint_restore(env.checkpoint.id)
        env = self.avfs.exec(argv=["ls"], readonly=True)
        self.assertEqual(env.decision, "allow")
        self.assertNotIn(b"a.txt", env.process.stdout_data())

    def test_exec_exit_code_and_stderr(self):
        env = self.avfs.exec(shell="echo oops >&2; exit 3")
        self.assertEqual(env.process.exit_code, 3)
        self.assertEqual(env.exit_status, 3)
        self.assertEqual(env.process.stderr_data(), b"oops\n")

    def test_denied(self):
        env = self.avfs.exec(argv=["rm", "-rf", "/"])
        self.assertEqual(env.decision, "deny")
        self.assertIsNone(env.process)
        self.assertEqual(env.exit_status, EXIT_NOT_RUN)
        self.assertTrue(env.reasons)
        self.assertEqual(self.avfs.decide(argv=["rm", "-rf", "/"])["decision"], "deny")
        self.assertEqual(self.avfs.decide(argv=["ls"])["decision"], "allow")

    def test_approval_round_trip(self):
        argv = ["curl", "http://example.invalid"]
        env = self.avfs.exec(argv=argv)
        self.assertEqual(env.decision, "require_approval")
        self.assertIsNone(env.process)
        self.assertEqual(env.approval.status, "pending")
        ap = env.approval.id
        pending = self.avfs.approval_list(status="pending")
        self.assertEqual([a["id"] for a in pending], [ap])
        self.assertEqual(pending[0]["request"]["argv"], argv)

        granted = self.avfs.approval_grant(ap, reason="checked")
        self.assertEqual(granted["status"], "granted")
        env = self.avfs.exec(argv=argv, approval=ap, timeout=20)
        self.assertIsNotNone(env.process, env.raw)  # it ran (curl fails: no such host)
        self.assertEqual(env.approval.id, ap)
        # An approval is used once.
        self.assertEqual([a["status"] for a in self.avfs.approval_list()], ["used"])

        env = self.avfs.exec(argv=argv)
        denied = self.avfs.approval_deny(env.approval.id)
        self.assertEqual(denied["status"], "denied")

    def test_errors(self):
        with self.assertRaises(AvfsError) as cm:
            self.avfs.checkpoint_restore(999)
        self.assertEqual(cm.exception.code, "checkpoint_not_found")
        self.assertEqual(cm.exception.details.get("checkpoint"), "999")
        self.assertEqual(cm.exception.exit_status, 1)
        with self.assertRaises(AvfsError) as cm:
            self.avfs.approval_grant("ap-0000000000000000")
        self.assertTrue(cm.exception.code)
        with self.assertRaises(ValueError):
            self.avfs.exec()

    def test_missing_binary(self):
        a = Avfs(bin=os.path.join(self.home, "no-such-avfs"), home=self.home)
        with self.assertRaises(OSError):
            a.exec(argv=["ls"])


@need_bin
class ServeTest(_Home):
    def setUp(self):
        super().setUp()
        self.sock = os.path.join(self.home, "run", "avfs.sock")
        env = dict(os.environ, AVFS_HOME=self.home)
        self.proc = subprocess.Popen([AVFS_BIN, "serve"], env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while True:
            if self.proc.poll() is not None:
                self.fail("avfs serve exited: %s" % self.proc.stderr.read().decode(errors="replace"))
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(self.sock)
                break
            except OSError:
                if time.monotonic() > deadline:
                    self.fail("avfs serve did not listen on %s" % self.sock)
                time.sleep(0.05)
        self.served = Avfs(bin=AVFS_BIN, home=self.home, server=self.sock)

    def tearDown(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stderr.close()
        super().tearDown()

    def test_exec_and_decide_over_the_socket(self):
        env = self.served.exec(shell="echo served > s.txt; cat s.txt", timeout=30)
        self.assertEqual(env.decision, "allow_with_checkpoint", env.raw)
        self.assertEqual(env.exit_status, 0)
        self.assertEqual(env.process.stdout_data(), b"served\n")
        self.assertEqual([c.path for c in env.changes], ["/s.txt"])
        env = self.served.exec(argv=["rm", "-rf", "/"])
        self.assertEqual(env.decision, "deny")
        self.assertEqual(env.exit_status, EXIT_NOT_RUN)
        self.assertEqual(self.served.decide(argv=["ls"])["decision"], "allow")
        # What keeps avfs from running a command is the envelope's error.
        bad = Avfs(bin=AVFS_BIN, home=self.home, vault="bad name!", server=self.sock)
        env = bad.exec(argv=["ls"])
        self.assertEqual(env.exit_status, 125)
        self.assertEqual(env.error.code, "invalid_input", env.raw)


if __name__ == "__main__":
    unittest.main()
