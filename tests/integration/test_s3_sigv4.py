"""SigV4 signing, proven: AWS's published S3 example signature, then a real mount against a server
that recomputes every request's signature (listing pages with continuation tokens, ranged GETs,
keys that need encoding, a session token) and refuses mismatches."""
import hashlib
import os

import pytest

from prepfs_harness import Prepfs
from s3rver_sigv4 import VerifyingS3, signature


def test_verifier_matches_the_aws_published_example():
    # "GET Object" example of the S3 SigV4 documentation (header-based auth).
    headers = {"host": "examplebucket.s3.amazonaws.com", "range": "bytes=0-9",
               "x-amz-content-sha256": hashlib.sha256(b"").hexdigest(), "x-amz-date": "20130524T000000Z"}
    sig = signature("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "GET", "/test.txt", "", headers,
                    ["host", "range", "x-amz-content-sha256", "x-amz-date"], headers["x-amz-content-sha256"],
                    "20130524T000000Z", "20130524/us-east-1/s3/aws4_request")
    assert sig == "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"


@pytest.mark.parametrize("token", [None, "FQoGZXIvYXdzEtoken/with+chars="])
def test_mount_signs_every_request(tmp_path, monkeypatch, token):
    objects = {f"ds/d {i}/f+{i}%.bin": os.urandom(1000 * i + 1) for i in range(5)}
    objects["ds/big.bin"] = os.urandom(3 * 1048576 + 3)
    srv = VerifyingS3("bkt", objects, "AKIDEXAMPLE", "secret/key+x", token)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret/key+x")
    if token:
        monkeypatch.setenv("AWS_SESSION_TOKEN", token)
    else:
        monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    (tmp_path / "mnt").mkdir()
    try:
        with Prepfs("s3://bkt/ds", tmp_path / "mnt", tmp_path / "ssd",
                    f"s3_endpoint={srv.endpoint},s3_region=us-east-1") as m:
            for key, data in objects.items():
                with open(m.raw(key[3:]), "rb") as f:
                    assert f.read() == data, key
            log = m.log_text()
            assert "secret/key+x" not in log and (not token or token not in log)
        assert not srv.failures, srv.failures[:3]
        assert srv.checked >= len(objects) + 3  # probe, 3 listing pages, the reads
    finally:
        srv.close()


def test_wrong_secret_is_refused_with_one_clear_line(tmp_path):
    import subprocess

    from prepfs_harness import PREPFS_BIN, assert_one_clear_line
    srv = VerifyingS3("bkt", {"ds/x": b"x"}, "AKIDEXAMPLE", "right-secret")
    try:
        (tmp_path / "mnt").mkdir()
        env = dict(os.environ, AWS_ACCESS_KEY_ID="AKIDEXAMPLE", AWS_SECRET_ACCESS_KEY="wrong-secret")
        env.pop("AWS_SESSION_TOKEN", None)
        res = subprocess.run([PREPFS_BIN, "s3://bkt/ds", str(tmp_path / "mnt"), "-o",
                              f"ssd_dir={tmp_path / 'ssd'},s3_endpoint={srv.endpoint}"],
                             capture_output=True, text=True, timeout=60, env=env)
        assert_one_clear_line(res, "access denied")
        assert "wrong-secret" not in res.stderr
        assert srv.failures and "signature mismatch" in srv.failures[0]
    finally:
        srv.close()
