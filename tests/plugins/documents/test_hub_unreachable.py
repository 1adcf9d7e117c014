"""Without network and without HF_HUB_OFFLINE, a Hub dataset fails fast with one line
(issue 30): lceval tries one connection to the Hub per process, and when it fails reads the
Hugging Face cache only, instead of letting huggingface_hub retry every request five times
with back-off (24 s of retry lines before the same answer)."""

from __future__ import annotations

import logging
import socket

import pytest

from lceval_plugins.documents import hub

from tests.cli import call


@pytest.fixture
def no_network(monkeypatch):
    """No HF_HUB_OFFLINE; every connection attempt fails (and is counted), as on a machine
    without network; the process's earlier answer is forgotten."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(hub, "_UNREACHABLE", {})
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # as imported without the variable; restored after
    import datasets

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    tries: list[tuple[str, int]] = []

    def refuse(address, *args, **kwargs):
        tries.append(address)
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "create_connection", refuse)
    return tries


def test_an_unreachable_hub_is_one_line_and_one_connection_attempt(no_network, caplog):
    with caplog.at_level(logging.WARNING):
        code, out, err = call("validate", "longbench_qasper", "longbench_hotpotqa")
    assert code == 4  # the specs are valid; their data is not installed
    lines = [line for line in out.splitlines() if line.startswith("valid; data not installed: ")]
    assert len(lines) == 2, out
    for line in lines:
        assert "is not in the local Hugging Face cache and the Hub could not be reached: huggingface.co:443: " \
               "Name or service not known." in line
    assert len(no_network) == 1  # one check for the whole command, not a retry storm per file
    from huggingface_hub import constants

    assert constants.HF_HUB_OFFLINE  # and huggingface_hub itself asks the network for nothing more
    assert "Retrying" not in err + caplog.text


def test_a_proxy_is_what_is_checked(no_network, monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert hub.unreachable() == "proxy.example:3128: Name or service not known"
    assert no_network == [("proxy.example", 3128)]
