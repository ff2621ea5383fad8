"""verify_oms: OpenSSF Model Signing bundles checked with an ECDSA key.
model_signing's own signed corpus (tests/data/oms), bundles written by
lensemble-verify sign-oms (files and shards, P-256 to P-521), a bundle
served by a real lensemble-verifyd (GET /artifact/<hash>/oms) against the
copy, and mutations of each; every refusal is compared with the code of
lensemble-verify verify-oms --json. Forged statements are signed here with
cryptography directly, not with the client's code."""

import base64
import hashlib
import json
import os
import shutil
import subprocess
import time
import unittest
import urllib.request

from helpers import CLI, DATA, TempDirTest, have_cli, need_cli, write_artifact

from lensemble_verify_client import OMSError, OMSResult, VerificationError, verify_oms

try:
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
except ImportError:
    ec = None

OMS = os.path.join(DATA, "oms")
CORPUS_PUB = os.path.join(OMS, "keys", "signing-key-pub.pem")
CORPUS_HINT = "e8450dec4eb99dae995da9af1bc2cc9f76ed669ee2e744f57abba763df3e3f8e"
DAEMON = os.environ.get("LVC_DAEMON") or os.path.join(os.path.dirname(CLI), "lensemble-verifyd")
os.environ["no_proxy"] = "127.0.0.1,localhost"


def c_oms(path, key, signature=None, ignore=()):
    """lensemble-verify verify-oms --json: (code, detail)."""
    cmd = [CLI, "verify-oms", "--json", "--key", key]
    if signature is not None:
        cmd += ["--signature", signature]
    for p in ignore:
        cmd += ["--ignore-path", p]
    r = subprocess.run(cmd + [path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    if r.returncode not in (0, 1, 2) or not r.stdout:    # 2: input that cannot be read
        raise AssertionError("verify-oms %s: exit %d, %r" % (path, r.returncode, r.stderr))
    out = json.loads(r.stdout.decode("utf-8"))
    return out["code"], out["detail"]


@unittest.skipIf(ec is None, "cryptography is not installed")
class OMSTest(TempDirTest):
    def verified(self, path, key, signature=None, ignore=()):
        r = verify_oms(path, key=key, signature=signature, ignore_paths=ignore)
        self.assertIsInstance(r, OMSResult)
        self.assertTrue(r.verified)
        if have_cli():
            self.assertEqual(c_oms(path, key, signature, ignore)[0], "ok")
        return r

    def refused(self, path, key, oms_code, says, signature=None, ignore=()):
        """verify_oms refuses with oms_code and a sentence holding `says`;
        verify-oms says the same code."""
        with self.assertRaises(OMSError) as cm:
            verify_oms(path, key=key, signature=signature, ignore_paths=ignore)
        e = cm.exception
        self.assertIsInstance(e, VerificationError)
        self.assertEqual(e.oms_code, oms_code, e.detail)
        self.assertEqual(e.code, "io_error" if oms_code == "unreadable" else "untrusted")
        self.assertTrue(any(says in d for d in [e.detail] + e.differences),
                        "%r is not in %r" % (says, [e.detail] + e.differences))
        if have_cli():
            self.assertEqual(c_oms(path, key, signature, ignore)[0], oms_code)
        return e

    def keygen(self, name, kind="ec-p256"):
        need_cli(self)
        prefix = os.path.join(self.tmp, name)
        r = subprocess.run([CLI, "keygen", "--type", kind, prefix], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return prefix + ".key", prefix + ".pub", r.stdout.decode().strip()

    def sign(self, key, path, *args):
        need_cli(self)
        r = subprocess.run([CLI, "sign-oms", "--key", key] + list(args) + [path],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)


class Corpus(OMSTest):
    """model_signing v0.3.1 to v1.1.0, key method."""

    def test_one_file_models(self):
        for v in ("v0.3.1", "v1.0.0"):
            with self.subTest(v):
                d = os.path.join(OMS, v + "-elliptic-key")
                r = self.verified(os.path.join(d, "signme-1"), CORPUS_PUB,
                                  signature=os.path.join(d, "model.sig"))
                self.assertEqual((r.key_hint, r.subject, list(r.resources)),
                                 (CORPUS_HINT, "signme-1", ["."]))

    def test_directories(self):
        for v in ("v1.0.1", "v1.1.0"):
            with self.subTest(v):
                r = self.verified(os.path.join(OMS, v + "-elliptic-key"), CORPUS_PUB,
                                  ignore=["ignore-me"])
                self.assertEqual(r.serialization, "files")
                self.assertEqual(r.root_digest,
                                 "92745110b1ab4368471cbe31664e10174e954b113a3df333db860317b2c6dec4")
                self.assertEqual(sorted(r.resources), ["signme-1", "signme-2"])

    def test_the_bundles_own_ignore_paths(self):
        self.verified(os.path.join(OMS, "v1.1.0-elliptic-key"), CORPUS_PUB)

    def test_unsigned_file_not_ignored(self):
        self.refused(os.path.join(OMS, "v1.0.1-elliptic-key"), CORPUS_PUB, "mismatch",
                     '"ignore-me" is not in the signature')

    def test_ignore_path_as_a_shell_completes_it(self):
        self.verified(os.path.join(OMS, "v1.0.1-elliptic-key"), CORPUS_PUB,
                      ignore=["./ignore-me/"])

    def test_another_key(self):
        _, pub, hint = self.keygen("other", "ec-p384")
        e = self.refused(os.path.join(OMS, "v1.1.0-elliptic-key"), pub, "key_mismatch",
                         "the bundle names key %s, not the key given (%s)" % (CORPUS_HINT, hint))
        self.assertEqual(e.differences, [])
        # A pre-v1.1 bundle names no hint: its rawBytes hold the key.
        self.refused(os.path.join(OMS, "v1.0.1-elliptic-key"), pub, "key_mismatch",
                     "rawBytes hold another public key", ignore=["ignore-me"])

    def test_certificate_bundle(self):
        self.refused(os.path.join(OMS, "v1.1.0-certificate"), CORPUS_PUB, "key_mismatch",
                     "signed by a certificate chain, not a bare public key",
                     ignore=["ignore-me"])

    def test_a_byte_of_the_corpus_changed(self):
        d = os.path.join(self.tmp, "m")
        shutil.copytree(os.path.join(OMS, "v1.1.0-elliptic-key"), d)
        with open(os.path.join(d, "signme-2"), "r+b") as f:
            b = f.read(1)
            f.seek(0)
            f.write(bytes([b[0] ^ 1]))
        self.refused(d, CORPUS_PUB, "mismatch", '"signme-2" differs from the signature: its '
                     "sha256 is")

    def test_key_as_bytes_and_as_object(self):
        with open(CORPUS_PUB, "rb") as f:
            pem = f.read()
        d = os.path.join(OMS, "v1.1.0-elliptic-key")
        self.assertTrue(verify_oms(d, key=pem).verified)
        self.assertTrue(verify_oms(d, key=serialization.load_pem_public_key(pem)).verified)

    def test_bad_arguments(self):
        d = os.path.join(OMS, "v1.1.0-elliptic-key")
        with self.assertRaisesRegex(ValueError, "not a PEM public key"):
            verify_oms(d, key=b"not a key")
        with self.assertRaisesRegex(ValueError, "ignore path '../x'"):
            verify_oms(d, key=CORPUS_PUB, ignore_paths=["../x"])
        with self.assertRaisesRegex(ValueError, "glob"):
            verify_oms(d, key=CORPUS_PUB, ignore_paths=["*.bin"])
        with self.assertRaisesRegex(ValueError, "single file"):
            verify_oms(os.path.join(d, "signme-1"), key=CORPUS_PUB)
        with self.assertRaises(TypeError):
            verify_oms(d, key=CORPUS_PUB, ignore_paths="ignore-me")
        with self.assertRaisesRegex(ValueError, "ECDSA"):
            from cryptography.hazmat.primitives.asymmetric import ed25519
            verify_oms(d, key=ed25519.Ed25519PrivateKey.generate().public_key())

    def test_no_bundle(self):
        self.refused(os.path.join(OMS, "v1.1.0-elliptic-key"), CORPUS_PUB, "unreadable",
                     "cannot read the signature", signature=os.path.join(self.tmp, "none.sig"))


class SignedHere(OMSTest):
    """Bundles written by lensemble-verify sign-oms, and mutations."""

    def setUp(self):
        super().setUp()
        self.key, self.pub, self.hint = self.keygen("signer")
        self.m = os.path.join(self.tmp, "model")
        os.makedirs(os.path.join(self.m, "sub", "cache"))
        os.makedirs(os.path.join(self.m, "cache"))
        self.write("w.bin", b"0123456789abcdef" * 4)
        self.write("sub/x.json", b'{"a": 1}')
        self.write("sub/cache/kept.bin", b"kept")
        self.write("cache/skipped.bin", b"skipped")
        self.write("empty", b"")
        self.sign(self.key, self.m, "--ignore-path", "cache")

    def write(self, rel, data):
        with open(os.path.join(self.m, rel), "wb") as f:
            f.write(data)

    def test_files(self):
        r = self.verified(self.m, self.pub)
        self.assertEqual(r.key_hint, self.hint)
        self.assertEqual(r.subject, "model")
        self.assertEqual(list(r.resources),
                         ["empty", "sub/cache/kept.bin", "sub/x.json", "w.bin"])
        self.assertEqual(r.resources["w.bin"],
                         hashlib.sha256(b"0123456789abcdef" * 4).hexdigest())

    def test_shards(self):
        sig = os.path.join(self.tmp, "shards.sig")
        self.sign(self.key, self.m, "--shards", "24", "--signature", sig, "--ignore-path", "cache")
        r = self.verified(self.m, self.pub, signature=sig)
        self.assertEqual(r.serialization, "shards")
        self.assertIn("w.bin:48:64", r.resources)
        self.assertNotIn("empty", " ".join(r.resources))    # an empty file has no shard
        self.write("w.bin", b"0123456789abcdef" * 4 + b"!")
        self.refused(self.m, self.pub, "mismatch", '"w.bin" is 65 bytes long; the signature\'s '
                     "shards of it end at byte 64", signature=sig)
        self.write("w.bin", b"0123456789abcdef" * 3 + b"0123456789abcdeF")
        self.refused(self.m, self.pub, "mismatch", '"w.bin" bytes 48..64 differ from the '
                     "signature", signature=sig)

    def test_every_curve(self):
        for kind in ("ec-p256", "ec-p384", "ec-p521"):
            with self.subTest(kind):
                key, pub, hint = self.keygen(kind, kind)
                sig = os.path.join(self.tmp, kind + ".sig")
                self.sign(key, self.m, "--signature", sig, "--ignore-path", "cache")
                self.assertEqual(self.verified(self.m, pub, signature=sig).key_hint, hint)

    def test_one_file(self):
        sig = os.path.join(self.tmp, "one.sig")
        self.sign(self.key, os.path.join(self.m, "w.bin"), "--signature", sig)
        self.verified(os.path.join(self.m, "w.bin"), self.pub, signature=sig)
        self.refused(self.m, self.pub, "mismatch", "for a one-file model, not a directory",
                     signature=sig)

    def test_a_byte_changed(self):
        self.write("sub/x.json", b'{"a": 2}')
        self.refused(self.m, self.pub, "mismatch", '"sub/x.json" differs from the signature')

    def test_an_extra_file(self):
        self.write("sub/extra.bin", b"x")
        e = self.refused(self.m, self.pub, "mismatch",
                         '"sub/extra.bin" is not in the signature (a file added, or one to ignore)')
        self.assertEqual(len(e.differences), 1)
        self.verified(self.m, self.pub, ignore=["sub/extra.bin"])

    def test_ignore_paths_are_exact_from_the_root(self):
        # The bundle ignores "cache": sub/cache is signed, cache/ is not.
        self.write("cache/new.bin", b"anything")
        self.verified(self.m, self.pub)
        self.write("sub/cache/new.bin", b"x")
        self.refused(self.m, self.pub, "mismatch", '"sub/cache/new.bin" is not in the signature')

    def test_git_ignored_at_the_top_only(self):
        os.makedirs(os.path.join(self.m, ".git"))
        self.write(".git/HEAD", b"ref")
        self.verified(self.m, self.pub)
        os.makedirs(os.path.join(self.m, "sub", ".git"))
        self.write("sub/.git/HEAD", b"ref")
        self.refused(self.m, self.pub, "mismatch", '"sub/.git/HEAD" is not in the signature')

    def test_a_missing_file(self):
        os.unlink(os.path.join(self.m, "sub", "x.json"))
        self.refused(self.m, self.pub, "mismatch",
                     '"sub/x.json" is in the signature but missing from the model')

    def test_a_file_signed_then_ignored(self):
        self.refused(self.m, self.pub, "mismatch",
                     '"sub/x.json" is in the signature but excluded by an ignore path',
                     ignore=["sub/x.json"])

    def test_several_differences(self):
        self.write("w.bin", b"changed")
        os.unlink(os.path.join(self.m, "sub", "x.json"))
        e = self.refused(self.m, self.pub, "mismatch", '"w.bin" differs from the signature')
        self.assertTrue(e.detail.endswith(" (and more differences)"), e.detail)
        self.assertEqual(len(e.differences), 2)

    def test_another_key(self):
        _, other, hint = self.keygen("other")
        self.refused(self.m, other, "key_mismatch", "names key %s, not the key given (%s)"
                     % (self.hint, hint))

    def test_a_symbolic_link(self):
        os.symlink("w.bin", os.path.join(self.m, "link.bin"))
        self.refused(self.m, self.pub, "mismatch",
                     '"link.bin" is a symbolic link; symbolic links are refused')

    def test_a_linked_directory(self):
        outside = os.path.join(self.tmp, "outside")
        os.makedirs(outside)
        os.symlink(outside, os.path.join(self.m, "sub", "more"))
        self.refused(self.m, self.pub, "mismatch", '"sub/more" is a symbolic link')

    def test_the_model_path_is_a_link(self):
        link = os.path.join(self.tmp, "link")
        os.symlink(self.m, link)
        self.refused(link, self.pub, "unreadable", "is a symbolic link; give the model's own "
                     "path", signature=os.path.join(self.m, "model.sig"))

    def test_a_fifo(self):
        os.mkfifo(os.path.join(self.m, "fifo"))
        self.refused(self.m, self.pub, "mismatch",
                     '"fifo" is neither a regular file nor a directory')

    # ---- forged statements, signed with the right key -----------------------

    def forge(self, edit, sig_name="forged.sig"):
        """The bundle of the model with its statement edited by edit(st),
        signed again with the signer's key: only the rules can refuse it."""
        with open(os.path.join(self.m, "model.sig"), "rb") as f:
            b = json.load(f)
        st = json.loads(base64.b64decode(b["dsseEnvelope"]["payload"]))
        edit(st)
        res = st["predicate"]["resources"]
        st["subject"][0]["digest"]["sha256"] = hashlib.sha256(
            b"".join(bytes.fromhex(r["digest"]) for r in res)).hexdigest()
        payload = json.dumps(st).encode()
        with open(self.key, "rb") as f:
            priv = serialization.load_pem_private_key(f.read(), None)
        t = b"application/vnd.in-toto+json"
        pae = b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)
        b["dsseEnvelope"]["payload"] = base64.b64encode(payload).decode()
        b["dsseEnvelope"]["signatures"][0]["sig"] = base64.b64encode(
            priv.sign(pae, ec.ECDSA(hashes.SHA256()))).decode()
        path = os.path.join(self.tmp, sig_name)
        with open(path, "w") as f:
            json.dump(b, f)
        return path

    def add(self, name, data=b"x"):
        def edit(st):
            st["predicate"]["resources"].append(
                {"name": name, "algorithm": "sha256", "digest": hashlib.sha256(data).hexdigest()})
            st["predicate"]["resources"].sort(key=lambda r: r["name"].encode())
        return edit

    def test_forged_but_consistent_verifies(self):
        self.verified(self.m, self.pub, signature=self.forge(lambda st: None))

    def test_path_attacks(self):
        for name in ("../outside", "/etc/passwd", "./w.bin", "sub//x", "sub/../w.bin", "sub/"):
            with self.subTest(name):
                self.refused(self.m, self.pub, "malformed", "is not a relative path in "
                             "canonical form", signature=self.forge(self.add(name)))

    def test_a_resource_naming_a_directory(self):
        self.refused(self.m, self.pub, "mismatch", 'resource "sub" names a directory, not a '
                     "file", signature=self.forge(self.add("sub")))

    def test_listed_twice(self):
        def twice(st):
            st["predicate"]["resources"].append(dict(st["predicate"]["resources"][-1]))
        self.refused(self.m, self.pub, "malformed", "is listed twice",
                     signature=self.forge(twice))

    def test_not_sorted(self):
        self.refused(self.m, self.pub, "malformed", "not sorted",
                     signature=self.forge(lambda st: st["predicate"]["resources"].reverse()))

    def test_glob_ignore_path(self):
        def glob(st):
            st["predicate"]["serialization"]["ignore_paths"].append("*.bin")
        self.refused(self.m, self.pub, "malformed", 'ignore path "*.bin"',
                     signature=self.forge(glob))

    def test_wrong_root_digest(self):
        sig = self.forge(lambda st: None)
        with open(sig) as f:
            b = json.load(f)
        st = json.loads(base64.b64decode(b["dsseEnvelope"]["payload"]))
        st["subject"][0]["digest"]["sha256"] = "0" * 64
        b["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(st).encode()).decode()
        with open(sig, "w") as f:
            json.dump(b, f)
        # Changed after signing: the signature is checked first.
        self.refused(self.m, self.pub, "bad_signature", "does not verify", signature=sig)

    def test_bundle_strictness(self):
        with open(os.path.join(self.m, "model.sig")) as f:
            b = json.load(f)
        cases = [
            ("an unknown field", lambda b: b.update(extra=1), "unknown field \"extra\""),
            ("two signatures", lambda b: b["dsseEnvelope"]["signatures"].append(
                b["dsseEnvelope"]["signatures"][0]), "holds 2 signatures"),
            ("another payload type", lambda b: b["dsseEnvelope"].update(payloadType="x"),
             'payloadType is "x"'),
            ("keyless", lambda b: b["verificationMaterial"].update(certificate={}), "keyless"),
        ]
        for what, edit, says in cases:
            with self.subTest(what):
                c = json.loads(json.dumps(b))
                edit(c)
                sig = os.path.join(self.tmp, "strict.sig")
                with open(sig, "w") as f:
                    json.dump(c, f)
                self.refused(self.m, self.pub, "unsupported" if what == "keyless" else
                             "malformed", says, signature=sig)
        sig = os.path.join(self.tmp, "dup.sig")
        with open(sig, "w") as f:
            f.write(json.dumps(b)[:-1] + ', "mediaType": "x"}')
        self.refused(self.m, self.pub, "malformed", "not valid JSON", signature=sig)


def _need_daemon(test):
    if not os.access(DAEMON, os.X_OK):
        if os.environ.get("LVC_REQUIRE_CLI"):
            test.fail("the daemon %s is not built" % DAEMON)
        test.skipTest("no daemon at %s" % DAEMON)


@unittest.skipIf(ec is None, "cryptography is not installed")
class ServedByTheDaemon(OMSTest):
    """A real lensemble-verifyd signs a bundle for a trusted artifact; the
    client checks it against the copy with the key GET /key gives."""

    def get(self, path, timeout=10):
        with urllib.request.urlopen(self.base + path, timeout=timeout) as r:
            return r.read()

    def wait(self, what, cond, limit=60.0):
        end = time.monotonic() + limit
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                self.fail("the daemon exited: %s" % self.log())
            try:
                if cond():
                    return
            except OSError:
                pass
            time.sleep(0.05)
        self.fail("%s within %.0f s: %s" % (what, limit, self.log()))

    def log(self):
        with open(self.logpath, errors="replace") as f:
            return f.read()[-4000:]

    def setUp(self):
        super().setUp()
        _need_daemon(self)
        os.chmod(self.tmp, 0o755)
        store, state = os.path.join(self.tmp, "store"), os.path.join(self.tmp, "state")
        os.makedirs(store)
        os.makedirs(state, mode=0o700)
        self.copy = os.path.join(store, "round-00000")
        _, self.h = write_artifact(self.copy)
        for d, _, names in os.walk(store):
            os.chmod(d, 0o755)
            for n in names:
                os.chmod(os.path.join(d, n), 0o644)
        conf = os.path.join(self.tmp, "verifyd.conf")
        lines = ["store = " + store, "state_dir = " + state, "listen = 127.0.0.1:0",
                 "genesis_hash = " + self.h]
        if os.getuid() == 0:        # the daemon drops to nobody
            lines.append("user = nobody")
            shutil.chown(state, "nobody")
        with open(conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.logpath = os.path.join(self.tmp, "daemon.log")
        logf = open(self.logpath, "w")
        self.addCleanup(logf.close)
        self.proc = subprocess.Popen([DAEMON, "-f", "-c", conf], stdout=logf,
                                     stderr=subprocess.STDOUT)
        self.addCleanup(self.stop)
        port = []

        def listening():
            for line in self.log().splitlines():
                if "listening on 127.0.0.1:" in line:
                    port.append(line.split("listening on 127.0.0.1:")[1].split()[0].strip(",;"))
                    return True
            return False
        self.wait("the daemon listens", listening)
        self.base = "http://127.0.0.1:%s" % port[0]
        self.wait("the artifact is trusted", lambda: json.loads(
            self.get("/artifact/" + self.h)).get("trusted") is True)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def test_the_daemons_bundle_verifies_the_copy(self):
        key = json.loads(self.get("/key"))
        pub = key["oms_public_key"].encode()
        sig = os.path.join(self.tmp, "verdict.sig")
        with open(sig, "wb") as f:
            f.write(self.get("/artifact/%s/oms" % self.h))
        r = verify_oms(self.copy, key=pub, signature=sig)
        self.assertEqual((r.verified, r.key_hint, r.subject), (True, key["oms_key_id"],
                                                               "round-00000"))
        self.assertEqual(sorted(r.resources), ["header.json", "weights.safetensors"])
        pubfile = os.path.join(self.tmp, "daemon-oms.pub")
        with open(pubfile, "wb") as f:
            f.write(pub)
        if have_cli():
            self.assertEqual(c_oms(self.copy, pubfile, sig)[0], "ok")

        # A downloaded copy with a byte changed, or another file, is refused.
        dl = os.path.join(self.tmp, "download")
        shutil.copytree(self.copy, dl)
        verify_oms(dl, key=pub, signature=sig)
        with open(os.path.join(dl, "weights.safetensors"), "r+b") as f:
            f.seek(-1, os.SEEK_END)
            b = f.read(1)
            f.seek(-1, os.SEEK_END)
            f.write(bytes([b[0] ^ 0x80]))
        self.refused(dl, pubfile, "mismatch", '"weights.safetensors" differs from the signature',
                     signature=sig)
        shutil.rmtree(dl)
        shutil.copytree(self.copy, dl)
        with open(os.path.join(dl, "README"), "w") as f:
            f.write("added\n")
        self.refused(dl, pubfile, "mismatch", '"README" is not in the signature', signature=sig)
        # Another key (the corpus's) does not verify it.
        self.refused(self.copy, CORPUS_PUB, "key_mismatch", "not the key given", signature=sig)


if __name__ == "__main__":
    unittest.main()
