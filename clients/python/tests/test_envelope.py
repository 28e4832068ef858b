import glob
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from avfs.envelope import Change, Envelope, ErrorBody, ProcessReport  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
GOLDEN = os.path.join(ROOT, "wire", "testdata", "golden")


class GoldenTest(unittest.TestCase):
    def test_all_golden_envelopes_parse(self):
        files = sorted(glob.glob(os.path.join(GOLDEN, "envelope_*.json")))
        self.assertGreaterEqual(len(files), 7, "golden envelopes not found in " + GOLDEN)
        for path in files:
            with self.subTest(os.path.basename(path)):
                with open(path) as f:
                    doc = json.load(f)
                env = Envelope.from_dict(doc)
                self.assertEqual(env.kind, "proxy_exec_result")
                self.assertEqual(env.schema_version, 1)
                self.assertIn(env.decision, ("allow", "allow_with_checkpoint", "require_approval", "deny"))
                self.assertEqual(env.extra, {}, "every field of the golden file is known")
                self.assertEqual(env.raw, doc)
                self.assertIsNotNone(env.timing)
                for c in env.changes:
                    self.assertIsInstance(c, Change)
                if env.process is not None:
                    self.assertIsInstance(env.process, ProcessReport)
                if env.error is not None:
                    self.assertIsInstance(env.error, ErrorBody)
                    self.assertTrue(env.error.code)

    def test_specific_goldens(self):
        def load(name):
            with open(os.path.join(GOLDEN, name)) as f:
                return Envelope.from_dict(json.load(f))

        ap = load("envelope_approval.json")
        self.assertEqual(ap.decision, "require_approval")
        self.assertIsNone(ap.process)
        self.assertTrue(ap.approval.id.startswith("ap-"))
        self.assertEqual(ap.approval.status, "pending")
        self.assertEqual(ap.reasons[0].id, "avfs.approval.network")

        ran = load("envelope_ran.json")
        self.assertTrue(ran.ran)
        self.assertIsInstance(ran.process.exit_code, int)
        self.assertIsInstance(ran.process.stdout_data(), bytes)
        self.assertEqual(ran.changes[0].path_bytes(), b"/a.txt")

        # Names that are not UTF-8: the same path, told apart by path_b64.
        raw = load("envelope_raw_names.json")
        self.assertEqual([c.path for c in raw.changes], ["/\ufffd\ufffd.txt"] * 2)
        self.assertEqual([c.path_bytes() for c in raw.changes], [b"/\xfe\xff.txt", b"/\xff\xfe.txt"])
        self.assertEqual([c.extra for c in raw.changes], [{}, {}])


class UnknownFieldsTest(unittest.TestCase):
    def test_unknown_fields_are_kept(self):
        doc = {
            "schema_version": 1, "kind": "proxy_exec_result", "id": "ex-1", "decision": "allow",
            "future_top": {"a": 1},
            "process": {"exit_code": 3, "stdout": "aGk=", "stdout_encoding": "base64", "new_field": True},
            "changes": [{"path": "/a", "op": "added", "kind": "file", "size_after": 2, "xattr": "x"}],
            "error": {"code": "quota_exceeded", "message": "full", "quota": "bytes", "limit": 10},
            "policy": {"reasons": [{"id": "r", "message": "m", "decision": "allow", "weight": 2}]},
        }
        env = Envelope.from_dict(doc)
        self.assertEqual(env.extra, {"future_top": {"a": 1}})
        self.assertEqual(env.process.exit_code, 3)
        self.assertEqual(env.process.extra, {"new_field": True})
        self.assertEqual(env.process.stdout_data(), b"hi")
        self.assertEqual(env.changes[0].size_after, 2)
        self.assertIsNone(env.changes[0].size_before)
        self.assertEqual(env.changes[0].extra, {"xattr": "x"})
        self.assertEqual(env.error.code, "quota_exceeded")
        self.assertEqual(env.error.details, {"quota": "bytes", "limit": 10})
        self.assertEqual(env.reasons[0].extra, {"weight": 2})
        # Missing fields take zero values.
        self.assertEqual(env.changes_total, 0)
        self.assertIsNone(env.checkpoint)
        self.assertEqual(env.hints, [])

    def test_not_an_object(self):
        with self.assertRaises(ValueError):
            Envelope.from_dict([1, 2])


if __name__ == "__main__":
    unittest.main()
