"""The Simplified Chinese catalog: complete, faithful to what it must not translate, compiled,
and actually used by the pages and the API.

The .po is read by a small parser below (pure Python, no gettext tools needed), so this runs on
any machine that can run the suite. The committed .mo is compared entry by entry with the .po:
a catalog edited without `make messages` (or compilemessages) fails here.
"""

from __future__ import annotations

import ast
import gettext
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import translation
from rest_framework.test import APIClient

from clusters.models import Cluster
from clusters.verifications.services import verification_request
from rlark_site.foundation.tenancy.models import Team
from tests.factories import load_fleet_rows

CATALOG = Path(__file__).resolve().parents[2] / "locale" / "zh_Hans" / "LC_MESSAGES"
PO = CATALOG / "django.po"
MO = CATALOG / "django.mo"
CJK = re.compile(r"[\u4e00-\u9fff]")

_KEYWORD = re.compile(r"^(msgctxt|msgid_plural|msgid|msgstr(?:\[(\d+)\])?)\s+(\".*\")$")
PYTHON_FORMAT = re.compile(r"%(?:\([^)]+\))?[-#0 +]*\d*(?:\.\d+)?[diouxXeEfFgGcrsa%]")
BRACE_FORMAT = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")
# Text that is code, markup or a contract and must reach the reader exactly as written.
VERBATIM = [
    re.compile(r"`[^`]+`"),  # inline code
    re.compile(r"</?[A-Za-z][^<>]*>"),  # HTML and <placeholders> such as <job name>
    re.compile(r"[\w./*@-]+=[\w./*@-]*\w"),  # key=value, name=count, rlinf.io/rdma=1
    re.compile(r"\b[a-z0-9-]+(?:\.[a-z0-9-]+)+/[\w.*-]*"),  # rlinf.io/*, nvidia.com/gpu
    re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]*\*?"),  # RAY_TEMP_DIR, RLINF_*
    re.compile(r"\b[a-z]+[A-Z][A-Za-z]*\b"),  # nodeSelector
    re.compile(r"\b[a-z][a-z0-9]*_[a-z0-9_]+\b"),  # authorized_keys, host_path
    re.compile(r"\b(?!NOT\b)[A-Z]{2,}\b"),  # ENTRYPOINT, YAML, CLI (emphasis is translated)
    re.compile(r"\bhead: true\b"),
    re.compile(r"(?<![\w-])--[a-z][\w-]*"),  # --temp-dir
    re.compile(r"\bray start\b"),
    re.compile(r"@sha256:"),
]


@dataclass(frozen=True)
class PoEntry:
    """One message of a .po file (obsolete `#~` entries are not messages and are skipped)."""

    msgctxt: str | None
    msgid: str
    msgid_plural: str | None
    msgstrs: tuple[str, ...]
    flags: frozenset[str]

    @property
    def label(self) -> str:
        return repr(self.msgid[:80])


def _unquote(text: str) -> str:
    """A PO string literal uses C escapes (\\n, \\t, \\", \\\\), which Python reads the same way."""
    value = ast.literal_eval(text)
    assert isinstance(value, str)
    return value


def _entry(fields: dict[str, str], strs: dict[int, str], flags: set[str]) -> PoEntry:
    return PoEntry(
        msgctxt=fields.get("msgctxt"),
        msgid=fields["msgid"],
        msgid_plural=fields.get("msgid_plural"),
        msgstrs=tuple(strs[i] for i in sorted(strs)),
        flags=frozenset(flags),
    )


def read_po(path: Path) -> list[PoEntry]:
    """Every entry of a .po file, the header (msgid "") first."""
    entries: list[PoEntry] = []
    fields: dict[str, str] = {}
    strs: dict[int, str] = {}
    flags: set[str] = set()
    current: tuple[str, int] = ("", 0)
    for raw in [*path.read_text(encoding="utf-8").splitlines(), ""]:
        line = raw.strip()
        if not line or (line.startswith("#") and "msgid" in fields and strs):
            if "msgid" in fields:
                entries.append(_entry(fields, strs, flags))
            fields, strs, flags = {}, {}, set()
        if not line or line.startswith("#~"):
            continue
        if line.startswith("#,"):
            flags.update(flag.strip() for flag in line[2:].split(",") if flag.strip())
        elif line.startswith("#"):
            continue
        elif match := _KEYWORD.match(line):
            keyword, index, text = match.groups()
            current = (keyword.split("[")[0], int(index or 0))
            if current[0] == "msgstr":
                strs[current[1]] = _unquote(text)
            else:
                fields[current[0]] = _unquote(text)
        elif line.startswith('"'):
            if current[0] == "msgstr":
                strs[current[1]] += _unquote(line)
            else:
                fields[current[0]] += _unquote(line)
        else:
            raise ValueError(f"{path}: cannot read line {raw!r}")
    return entries


@pytest.fixture(scope="module")
def entries() -> list[PoEntry]:
    return read_po(PO)


@pytest.fixture(scope="module")
def messages(entries: list[PoEntry]) -> list[PoEntry]:
    return [e for e in entries if e.msgid]


@pytest.fixture(autouse=True)
def _english_afterwards() -> Iterator[None]:
    """LocaleMiddleware activates the request's language for the thread; later tests want the
    default back."""
    yield
    translation.deactivate()


def _headers(entries: list[PoEntry]) -> dict[str, str]:
    header = entries[0]
    assert header.msgid == "", "the .po must start with its header"
    pairs = (line.split(":", 1) for line in header.msgstrs[0].splitlines() if ":" in line)
    return {key.strip(): value.strip() for key, value in pairs}


def test_the_header_declares_chinese_utf8_and_one_plural_form(entries: list[PoEntry]) -> None:
    headers = _headers(entries)
    assert "fuzzy" not in entries[0].flags
    assert headers["Language"] == "zh_Hans"
    assert headers["Content-Type"] == "text/plain; charset=UTF-8"
    assert headers["Plural-Forms"] == "nplurals=1; plural=0;"


def test_the_parser_reads_a_catalog(tmp_path: Path) -> None:
    po = tmp_path / "django.po"
    po.write_text(
        'msgid ""\nmsgstr ""\n"Language: zh_Hans\\n"\n\n'
        "#: a.py:1\n#, fuzzy, python-format\n"
        'msgid "Hello %(name)s"\nmsgstr ""\n"你好 "\n"%(name)s"\n\n'
        '#~ msgid "Gone"\n#~ msgstr "已删除"\n\n'
        'msgid "%(n)s node"\nmsgid_plural "%(n)s nodes"\nmsgstr[0] "%(n)s 个\\"节点\\""\n',
        encoding="utf-8",
    )
    header, hello, node = read_po(po)
    assert header.msgstrs == ("Language: zh_Hans\n",)
    assert (hello.msgid, hello.msgstrs, hello.flags) == (
        "Hello %(name)s", ("你好 %(name)s",), frozenset({"fuzzy", "python-format"}))
    assert (node.msgid_plural, node.msgstrs) == ("%(n)s nodes", ('%(n)s 个"节点"',))


def test_every_message_is_translated_and_none_is_fuzzy(messages: list[PoEntry]) -> None:
    assert len(messages) > 600
    assert [e.label for e in messages if "fuzzy" in e.flags] == []
    empty = [e.label for e in messages if not e.msgstrs or not all(s.strip() for s in e.msgstrs)]
    assert empty == []
    assert [e.label for e in messages if e.msgid_plural is not None and len(e.msgstrs) != 1] == []


# Names the manual keeps in English; every other message must come back in Chinese.
LATIN_TRANSLATIONS = {"API": "API", "Head Task": "Head Task", "GPUs": "GPU", "CPU": "CPU"}


def test_translations_are_chinese(messages: list[PoEntry]) -> None:
    latin = {e.msgid: e.msgstrs[0] for e in messages if not CJK.search(e.msgstrs[0])}
    assert latin == LATIN_TRANSLATIONS


def _placeholders(text: str) -> list[str]:
    return sorted(PYTHON_FORMAT.findall(text) + BRACE_FORMAT.findall(text))


def test_every_translation_keeps_the_placeholders(messages: list[PoEntry]) -> None:
    broken = [
        (e.label, msgstr)
        for e in messages
        for msgstr in e.msgstrs
        if _placeholders(msgstr) != _placeholders(e.msgid_plural or e.msgid)
    ]
    assert broken == []


def test_every_translation_keeps_code_and_markup(messages: list[PoEntry]) -> None:
    lost = [
        (e.label, token)
        for e in messages
        for pattern in VERBATIM
        for token in pattern.findall(e.msgid)
        if any(token not in msgstr for msgstr in e.msgstrs)
    ]
    assert lost == []


def test_the_compiled_catalog_holds_exactly_the_po(messages: list[PoEntry]) -> None:
    with MO.open("rb") as handle:
        compiled = gettext.GNUTranslations(handle)
    expected: dict[Any, str] = {}
    for e in messages:
        key = e.msgid if e.msgctxt is None else f"{e.msgctxt}\x04{e.msgid}"
        if e.msgid_plural is None:
            expected[key] = e.msgstrs[0]
        else:
            expected.update({(key, i): s for i, s in enumerate(e.msgstrs)})
    # The parsed table of the .mo: CPython keeps it in `_catalog` (the header under "").
    actual = {k: v for k, v in compiled._catalog.items() if k != ""}  # type: ignore[attr-defined]
    assert set(actual) == set(expected), "the .mo is out of date: run `make messages`"
    assert [k for k in expected if actual[k] != expected[k]] == []
    plural = next(e for e in messages if e.msgid_plural is not None)
    assert compiled.ngettext(plural.msgid, plural.msgid_plural or "", 2) == plural.msgstrs[0]


# -- the catalog in use --------------------------------------------------------------------------

def _page(client: Client, url: str) -> str:
    response = client.get(url, HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert response.status_code == 200, url
    assert response["Content-Language"] == "zh-hans"
    return response.content.decode()


@pytest.mark.django_db
def test_the_login_page_is_chinese(client: Client) -> None:
    page = _page(client, "/login/")
    assert "登录 RLark" in page
    assert "用户名" in page


@pytest.mark.django_db
def test_the_job_list_and_the_navigation_are_chinese(client: Client, member: Any) -> None:
    client.force_login(member)
    page = _page(client, "/jobs/")
    assert "创建任务" in page
    assert "还没有任务。" in page
    for label in ("启动清单", "部署参数", "SSH 公钥", "运行记录", "管理员验证", "退出登录"):
        assert label in page


@pytest.mark.django_db
def test_wizard_step_1_is_chinese(client: Client, member: Any) -> None:
    client.force_login(member)
    page = _page(client, "/jobs/wizard/new/")
    assert "第一步：角色和资源" in page
    assert "任务名称" in page
    assert "请选择且只选择一个 Header 角色" in page


@pytest.mark.django_db
def test_the_verification_queue_is_chinese_for_an_admin(
    client: Client, team: Team, member: Any, admin_user: Any
) -> None:
    load_fleet_rows()
    verification_request(
        team=team, user=member, cluster=Cluster.objects.get(name="gpu-a"),
        selector={"rlinf.io/pool": "a100-head"}, for_header_role=True,
    )
    client.force_login(admin_user)
    page = _page(client, "/clusters/verifications/queue/")
    assert "验证队列" in page
    assert "已对照全局 Node 清单检查的选择器组合" in page
    assert "用于 Header 角色" in page
    assert "批准" in page and "拒绝" in page


@pytest.mark.django_db
def test_findings_in_an_api_response_are_chinese(
    api_client_for: Callable[[Any], APIClient], owner: Any
) -> None:
    load_fleet_rows()
    api = api_client_for(owner)
    response = api.post(
        "/api/v1/jobs/",
        {"name": "zh-findings", "task_type": "rl", "run_script": "",
         "roles": [{"name": "Actor", "cluster": "gpu-a", "selector": {"rlinf.io/pool": "a100-a"}}]},
        format="json", HTTP_ACCEPT_LANGUAGE="zh-hans",
    )
    assert response.status_code == 201, response.content
    assert response["Content-Language"] == "zh-hans"
    findings = {f["code"]: f["message"] for f in response.json()["findings"]}
    assert findings["run_script.empty"] == "运行脚本为必填项：Head Task 会在 Ray 启动后执行它。"
    assert findings["image.missing"] == "镜像为必填项。"
    assert [m for m in findings.values() if not CJK.search(m)] == []
