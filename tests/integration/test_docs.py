"""The manual documents every option the binary accepts, and renders cleanly."""
import os
import re
import subprocess

from prepfs_harness import PREPFS_BIN

MAN = os.path.join(os.path.dirname(__file__), "..", "..", "man", "prepfs.8")


def help_option_keys():
    out = subprocess.run([PREPFS_BIN, "--help"], capture_output=True, text=True, check=True).stdout
    section = out.split("Options for -o", 1)[1].split("Examples:", 1)[0]
    keys = re.findall(r"^\s{2}([a-z_0-9]+)", section, re.M)
    assert len(keys) >= 8, section
    return keys


def test_every_option_is_in_the_man_page():
    text = open(MAN).read()
    for key in help_option_keys():
        assert re.search(rf"\.B(I)? {key}(=|\s|$)", text, re.M), f"{key} is not documented in prepfs.8"


def test_man_page_renders_without_warnings():
    res = subprocess.run(["groff", "-man", "-ww", "-z", MAN], capture_output=True, text=True)
    assert res.returncode == 0 and res.stderr == "", res.stderr
