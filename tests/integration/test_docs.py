"""The manual documents every option the binary accepts, and renders cleanly."""
import os
import re
import subprocess

from prepfs_harness import help_option_keys

MAN = os.path.join(os.path.dirname(__file__), "..", "..", "man", "prepfs.8")




def test_every_option_is_in_the_man_page():
    text = open(MAN).read()
    for key in help_option_keys():
        assert re.search(rf"\.B(I)? {key}(=|\s|$)", text, re.M), f"{key} is not documented in prepfs.8"


def test_man_page_renders_without_warnings():
    res = subprocess.run(["groff", "-man", "-ww", "-z", MAN], capture_output=True, text=True)
    assert res.returncode == 0 and res.stderr == "", res.stderr
