"""Webhook deliveries never reach an internal address (SPEC 18), tried against real servers on
loopback: blocked by default (IPv4, IPv6, IPv4-mapped, metadata, private, names resolving to
loopback), opened by `RLARK_WEBHOOK_ALLOWED_NETWORKS`, no redirect followed, no DNS rebinding,
and a delivery log holding a status or an error class, never an error's text.

Every test here runs under `connections`: a connection to anything but loopback is recorded
and refused by the test itself, so even a broken rule sends nothing off this machine; host
names under `.rlark.test` answer what `resolver` says.
"""

from __future__ import annotations

import importlib
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from clusters.credentials import encrypt
from clusters.models import Cluster
from clusters.verifications.services import verification_request
from jobs.models import NotificationEvent, TeamWebhook, WebhookDelivery
from jobs.notify import services
from jobs.notify.services import deliver_webhook
from rlark_site.foundation.tenancy.models import Team
from tests.factories import load_fleet_rows
from tests.jobs.notify_support import (
    LOOPBACK,
    SECRET,
    Connections,
    Receiver,
    Resolver,
    signature_ok,
)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def guarded(connections: Connections, resolver: Resolver) -> None:
    """The safety net and the test resolver for every test of this file."""


@pytest.fixture
def closed(settings: Any) -> None:
    settings.RLARK_WEBHOOK_ALLOWED_NETWORKS = []


@pytest.fixture
def loopback_open(settings: Any) -> None:
    settings.RLARK_WEBHOOK_ALLOWED_NETWORKS = LOOPBACK


@pytest.fixture
def local() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.stop()


@pytest.fixture
def internal() -> Iterator[Receiver]:
    """Another server on loopback: what an attacker would like to reach."""
    server = Receiver()
    yield server
    server.stop()


@pytest.fixture
def event(team: Team, member: Any) -> NotificationEvent:
    load_fleet_rows()
    verification = verification_request(
        team=team, user=member, cluster=Cluster.objects.get(name="gpu-a"),
        selector={"rlinf.io/gpu-model": "a100", "topology.rlinf.io/cluster": "gpu-a"})
    return NotificationEvent.objects.create(
        key=f"verification_decided:{verification.pk}", kind="verification_decided",
        team=team, verification=verification, payload={"team": team.slug})


def one_try(event: NotificationEvent, url: str) -> WebhookDelivery:
    """One delivery try of `event` to `url`, stored as it might have been before the save-time
    rule existed (or as a host name whose address changed since): straight into the table.
    A delivery of the event made by an earlier call is replaced."""
    WebhookDelivery.objects.filter(event=event).delete()
    webhook, _created = TeamWebhook.objects.update_or_create(
        team=event.team, defaults={"url": url, "secret_encrypted": encrypt(SECRET)})
    delivery = WebhookDelivery.objects.create(event=event, webhook=webhook, url=url)
    deliver_webhook(delivery.pk)
    delivery.refresh_from_db()
    return delivery


def blocked(delivery: WebhookDelivery) -> bool:
    return (delivery.status_codes, delivery.last_error) == ([None], "blocked address")


@pytest.mark.usefixtures("closed")
def test_a_webhook_to_loopback_is_blocked_at_delivery(event: NotificationEvent,
                                                      local: Receiver,
                                                      connections: Connections) -> None:
    delivery = one_try(event, local.url)
    assert blocked(delivery)
    assert local.received == [] and connections.tried == []


@pytest.mark.usefixtures("closed")
def test_ipv6_loopback_and_the_ipv4_mapped_form_are_blocked(event: NotificationEvent,
                                                            local: Receiver,
                                                            connections: Connections) -> None:
    six = Receiver(host="::1")
    try:
        assert blocked(one_try(event, six.url))
        assert blocked(one_try(event, f"http://[::ffff:127.0.0.1]:{local.port}/hook"))
        assert blocked(one_try(event, f"http://[::ffff:7f00:1]:{local.port}/hook"))
        assert six.received == [] and local.received == []
    finally:
        six.stop()
    assert connections.tried == []


@pytest.mark.usefixtures("closed")
@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://10.1.2.3:8080/hook",
    "http://192.168.0.10/hook",
    "http://0.0.0.0:6379/",
    "http://2130706433:5432/",
    "http://[64:ff9b::a9fe:a9fe]/",
])
def test_metadata_private_and_numeric_spellings_are_blocked_without_a_connection(
    event: NotificationEvent, url: str, connections: Connections
) -> None:
    assert blocked(one_try(event, url))
    assert connections.tried == []


@pytest.mark.usefixtures("closed")
def test_a_host_name_resolving_to_loopback_is_blocked(event: NotificationEvent,
                                                      local: Receiver, resolver: Resolver,
                                                      connections: Connections) -> None:
    name = resolver.name("inside.rlark.test", ["93.184.216.34", "127.0.0.1"])
    assert blocked(one_try(event, f"http://localhost:{local.port}/hook"))
    assert blocked(one_try(event, f"http://{name}:{local.port}/hook"))  # one bad answer is enough
    assert local.received == [] and connections.tried == []


@pytest.mark.usefixtures("loopback_open")
def test_the_allow_list_opens_loopback_and_the_receiver_gets_the_signed_post(
    event: NotificationEvent, local: Receiver, resolver: Resolver
) -> None:
    name = resolver.name("hooks.rlark.test", ["127.0.0.1"])
    delivery = one_try(event, f"http://{name}:{local.port}/hook")
    assert (delivery.status_codes, delivery.delivered_at is not None) == ([200], True)
    [(headers, body)] = local.received
    assert signature_ok(headers, body)
    assert headers["host"] == f"{name}:{local.port}"  # the URL's host, not the address


@pytest.mark.usefixtures("loopback_open")
def test_a_redirect_is_logged_as_its_status_and_not_followed(event: NotificationEvent,
                                                             local: Receiver,
                                                             internal: Receiver) -> None:
    local.answers = [(302, {"Location": internal.url})] * 10
    delivery = one_try(event, local.url)
    assert (delivery.status_codes, delivery.last_error) == ([302], "HTTP 302")
    for _ in range(services.WEBHOOK_TRIES - 1):
        deliver_webhook(delivery.pk)
    delivery.refresh_from_db()
    assert delivery.gave_up_at is not None and delivery.status_codes == [302] * 5
    assert len(local.received) == 5 and internal.received == []


def test_a_rebinding_name_cannot_reach_the_internal_address(
    event: NotificationEvent, settings: Any, resolver: Resolver, connections: Connections
) -> None:
    """Validation sees 127.0.0.2 (opened); any later lookup of the name would say 127.0.0.1
    (closed), where an internal server listens on the same port. The connection goes to the
    address that was validated."""
    settings.RLARK_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.2/32"]
    outside, inside = _same_port_pair()
    try:
        name = resolver.name("rebind.rlark.test", ["127.0.0.2"], ["127.0.0.1"])
        delivery = one_try(event, f"http://{name}:{outside.port}/hook")
        assert delivery.status_codes == [200] and len(outside.received) == 1
        assert inside.received == [] and connections.to("127.0.0.1") == []
        assert resolver.lookups == [name]  # resolved once
    finally:
        outside.stop()
        inside.stop()


def _same_port_pair() -> tuple[Receiver, Receiver]:
    """Receivers on 127.0.0.2 and 127.0.0.1 with one port number (a few tries: the port
    chosen for the first may be taken on the second address)."""
    for _ in range(20):
        outside = Receiver(host="127.0.0.2")
        try:
            return outside, Receiver(host="127.0.0.1", port=outside.port)
        except OSError:
            outside.stop()
    raise AssertionError("no port free on both 127.0.0.1 and 127.0.0.2")


@pytest.mark.usefixtures("loopback_open")
def test_errors_are_logged_as_classes_never_as_their_text(
    event: NotificationEvent, local: Receiver, resolver: Resolver,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(services, "WEBHOOK_TIMEOUT", 0.5)
    with socket.socket() as silent, socket.socket() as unused:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # accepts (in the kernel), never answers
        unused.bind(("127.0.0.1", 0))  # bound, not listening: refused
        tries = {
            "refused": f"http://127.0.0.1:{unused.getsockname()[1]}/hook",
            "timeout": f"http://127.0.0.1:{silent.getsockname()[1]}/hook",
            "tls": f"https://127.0.0.1:{local.port}/hook",
            "dns": "http://nowhere.rlark.test/hook",
        }
        logged = {name: one_try(event, url).last_error for name, url in tries.items()}
    assert logged == {name: name for name in tries}


@pytest.mark.usefixtures("closed")
def test_the_delivery_log_shows_the_class_in_both_languages(
    event: NotificationEvent, team: Team, owner: Any, api_client_for: Any
) -> None:
    one_try(event, "http://169.254.169.254/latest/meta-data/")
    log = api_client_for(owner).get(reverse("api:team-webhook-deliveries", args=[team.slug]))
    assert [(row["status_codes"], row["last_error"]) for row in log.json()] == [
        ([None], "blocked address")]
    web = Client()
    web.force_login(owner)
    page = reverse("teams:detail", args=[team.slug])
    assert "blocked address" in web.get(page).content.decode()
    assert "地址被拦截" in web.get(page, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()


def test_old_error_texts_become_classes() -> None:
    migration = importlib.import_module("jobs.migrations.0019_webhook_delivery_error_classes")
    texts = {
        "HTTPConnectionPool(host='10.0.0.5', port=6379): Max retries exceeded (Caused by "
        "NewConnectionError(': Failed to establish a new connection: [Errno 111] Connection "
        "refused'))": "refused",
        "HTTPConnectionPool(host='10.0.0.5', port=22): Read timed out. (read timeout=5.0)":
            "timeout",
        "[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)": "tls",
        "NameResolutionError(\"Failed to resolve 'x' ([Errno -2] Name or service not known)\")":
            "dns",
        "not an http(s) URL": "invalid url",
        "Connection aborted. RemoteDisconnected('Remote end closed connection')": "connection",
    }
    assert {text: migration.error_class(text) for text in texts} == texts


# Save-time refusal: the page and the API, through the one rule (validate_webhook_url).

INTERNAL_URLS = ["http://169.254.169.254/latest/meta-data/", "http://[::1]:6379/",
                 "http://0177.0.0.1:5432/", "http://localhost:8000/hook"]


@pytest.mark.usefixtures("closed")
@pytest.mark.parametrize("url", INTERNAL_URLS)
def test_the_api_refuses_an_internal_url_when_it_is_set(team: Team, owner: Any,
                                                        api_client_for: Any, url: str) -> None:
    answer = api_client_for(owner).put(reverse("api:team-webhook", args=[team.slug]),
                                       {"url": url, "secret": SECRET}, format="json")
    assert answer.status_code == 400 and answer.json()["field"] == "url"
    assert "internal address" in answer.json()["errors"]["url"][0]
    assert not TeamWebhook.objects.exists()


@pytest.mark.usefixtures("closed")
def test_the_team_page_refuses_an_internal_url_in_both_languages(team: Team,
                                                                 owner: Any) -> None:
    web = Client()
    web.force_login(owner)
    page = reverse("teams:detail", args=[team.slug])
    body = {"url": "http://169.254.169.254/latest/meta-data/", "secret": SECRET,
            "enabled": "on"}
    english = web.post(page, body)
    assert english.status_code == 200
    assert "This URL names an internal address" in english.content.decode()
    chinese = web.post(page, body, HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "内部地址" in chinese.content.decode()
    assert not TeamWebhook.objects.exists()


@pytest.mark.usefixtures("loopback_open")
def test_an_opened_range_may_be_set(team: Team, owner: Any, api_client_for: Any) -> None:
    answer = api_client_for(owner).put(reverse("api:team-webhook", args=[team.slug]),
                                       {"url": "http://127.0.0.1:9000/hook", "secret": SECRET},
                                       format="json")
    assert answer.status_code == 200
    assert TeamWebhook.objects.get(team=team).url == "http://127.0.0.1:9000/hook"
