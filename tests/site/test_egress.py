"""The egress rule (rlark_site/foundation/egress.py) without the network: which addresses are
internal, what the allow-list opens, which URL spellings name an internal address literally,
and that the save-time rule and AntiSSRF's connect-time policy decide every address alike.
Deliveries against real servers: tests/jobs/test_webhook_egress.py."""

from __future__ import annotations

import ipaddress

import pytest
from django.core.exceptions import ImproperlyConfigured

from rlark_site import devservices
from rlark_site.foundation import egress
from rlark_site.foundation.conf import env_networks

INTERNAL = [
    "127.0.0.1", "127.255.255.254", "::1", "0.0.0.0", "0.1.2.3", "::",
    "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "100.64.0.1", "100.100.100.200",
    "169.254.169.254", "169.254.0.1", "fe80::1", "fd00:ec2::254", "fc00::1", "fec0::1",
    "168.63.129.16", "192.0.0.192", "224.0.0.1", "239.255.255.250", "ff02::1",
    "240.0.0.1", "255.255.255.255", "198.18.0.1", "192.0.2.1", "2001:db8::1",
    "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1",  # IPv4-mapped
    "::127.0.0.1", "::169.254.169.254",  # IPv4-compatible
    "::ffff:0:127.0.0.1",  # IPv4-translated
    "64:ff9b::7f00:1", "64:ff9b::808:808", "64:ff9b:1::1",  # NAT64 prefixes, whatever inside
    "2002:7f00:1::1", "2001::1",  # 6to4, Teredo
]
PUBLIC = ["93.184.216.34", "8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8",
          "172.32.0.1", "100.128.0.1"]


@pytest.mark.parametrize("address", INTERNAL)
def test_internal_addresses_are_blocked(address: str) -> None:
    assert egress.address_blocked(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address: str) -> None:
    assert not egress.address_blocked(ipaddress.ip_address(address))


def test_the_allow_list_opens_only_its_ranges() -> None:
    loopback = egress.parse_networks(["127.0.0.0/8"])
    assert not egress.address_blocked(ipaddress.ip_address("127.0.0.1"), loopback)
    assert not egress.address_blocked(ipaddress.ip_address("::ffff:127.0.0.1"), loopback)
    assert egress.address_blocked(ipaddress.ip_address("::1"), loopback)
    assert egress.address_blocked(ipaddress.ip_address("10.0.0.1"), loopback)
    assert egress.address_blocked(ipaddress.ip_address("169.254.169.254"), loopback)


@pytest.mark.parametrize("opened", [(), ("127.0.0.0/8",), ("10.0.0.0/8", "::1/128")])
def test_save_time_and_connect_time_decide_every_address_alike(opened: tuple[str, ...]) -> None:
    """The two sides of one rule: `address_blocked` (save time) and the AntiSSRF policy the
    delivery connects through, over the same networks."""
    allowed = egress.parse_networks(opened)
    policy = egress._policy(allowed)
    for address in INTERNAL + PUBLIC:
        blocked = egress.address_blocked(ipaddress.ip_address(address), allowed)
        assert policy._is_str_ip_address_connection_allowed(address) is not blocked, address


@pytest.mark.parametrize("url", [
    "http://127.0.0.1/hook", "http://127.1/", "http://2130706433/", "http://0x7f.1/",
    "http://0x7f000001:8080/", "http://0177.0.0.1/", "http://017700000001/", "http://0/",
    "http://0.0.0.0:6379/", "https://[::1]:8443/", "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/", "http://[fe80::1%25eth0]/", "http://169.254.169.254/latest/",
    "http://10.0.0.5:5432/", "http://localhost:9000/hook", "http://LOCALHOST./",
    "http://api.localhost/", "http://user:pass@192.168.1.1/",
])
def test_a_url_naming_an_internal_address_literally_is_refused(url: str) -> None:
    assert egress.blocked_literal(url)


@pytest.mark.parametrize("url", [
    "https://hooks.example.com/rlark", "http://8.8.8.8/", "https://[2606:4700::1]/",
    "http://127.0.0.1.example.com/", "http://localhost.example.com/", "not a url",
])
def test_names_and_public_addresses_are_left_to_the_delivery(url: str) -> None:
    assert not egress.blocked_literal(url)


def test_an_opened_range_may_be_named_literally() -> None:
    opened = egress.parse_networks(["10.0.0.0/8", "127.0.0.0/8", "::1"])
    assert not egress.blocked_literal("http://10.20.30.40:8080/hook", opened)
    assert not egress.blocked_literal("http://localhost:9000/hook", opened)
    assert egress.blocked_literal("http://169.254.169.254/", opened)


def test_the_setting_accepts_cidrs_and_refuses_anything_else(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RLARK_WEBHOOK_ALLOWED_NETWORKS", " 127.0.0.0/8, ::1 ,10.1.2.3/16")
    assert env_networks("RLARK_WEBHOOK_ALLOWED_NETWORKS") == [
        "127.0.0.0/8", "::1/128", "10.1.0.0/16"]
    monkeypatch.setenv("RLARK_WEBHOOK_ALLOWED_NETWORKS", "127.0.0.0/8,intranet")
    with pytest.raises(ImproperlyConfigured, match="'intranet' is not a network"):
        env_networks("RLARK_WEBHOOK_ALLOWED_NETWORKS")
    monkeypatch.delenv("RLARK_WEBHOOK_ALLOWED_NETWORKS")
    assert env_networks("RLARK_WEBHOOK_ALLOWED_NETWORKS") == []


def test_make_run_opens_loopback_and_says_so() -> None:
    env: dict[str, str] = {}
    line = devservices.open_local_webhooks(env)
    assert env["RLARK_WEBHOOK_ALLOWED_NETWORKS"] == "127.0.0.0/8,::1/128"
    assert "127.0.0.0/8" in line and "RLARK_WEBHOOK_ALLOWED_NETWORKS" in line
    chosen = {"RLARK_WEBHOOK_ALLOWED_NETWORKS": ""}
    assert "closed" in devservices.open_local_webhooks(chosen)
    assert chosen["RLARK_WEBHOOK_ALLOWED_NETWORKS"] == ""
