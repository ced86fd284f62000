"""Routes files: parsing (every error names its line), matching, first match wins, continue, the default receiver."""

from __future__ import annotations

import pytest

from stormwatch.alerting.config_file import ConfigError
from stormwatch.alerting.kinds import AlertKind
from stormwatch.alerting.ledger import ChannelName
from stormwatch.alerting.observations import Labels
from stormwatch.alerting.routes import Receiver, RouteTable, parse_routes
from stormwatch.alerting.secret_names import SecretName
from stormwatch.severity import Severity

FILE = "reports/routes.toml"
DEFAULT = Receiver(name="default", slack_webhook=SecretName(env="DEFAULT_HOOK"),
                   smtp_url=SecretName(env="DEFAULT_SMTP"), email_to=("ops@example.com",))
NO_SMTP = Receiver(name="default", slack_webhook=SecretName(env="DEFAULT_HOOK"))
ROUTES = """\
# teams
[receivers.llama-team]
slack_webhook_env = "LLAMA_HOOK"
email_to = ["llama@example.com", "lead@example.com"]
send_resolved = true

[receivers.infra]
email_to = "infra@example.com"
smtp_url_block = "infra-smtp"

[[routes]]
job = ["llama-*", "mistral-*"]
receiver = "llama-team"
continue = true

[[routes]]
kind = ["regression", "suspect_host"]
receiver = "infra"

[[routes]]
job_name = "bert-*"
severity = "critical"
receiver = "default"
"""


def labels(job_id: str = "resnet-0142", *, name: str = "resnet", kind: AlertKind = AlertKind.MOST_SEVERE,
           severity: Severity = Severity.CRITICAL) -> Labels:
    return Labels(job_id, name, kind, severity, "alert:critical", None)


@pytest.fixture(scope="module")
def table() -> RouteTable:
    return parse_routes(ROUTES, file=FILE, default=DEFAULT)


def test_receivers_are_read_with_their_secrets_named_not_held(table: RouteTable) -> None:
    llama, infra = table.receivers["llama-team"], table.receivers["infra"]
    assert llama.slack_webhook == SecretName(env="LLAMA_HOOK")  # a name: the file holds no secret
    assert llama.smtp_url == DEFAULT.smtp_url  # no SMTP of its own: the default one
    assert llama.email_to == ("llama@example.com", "lead@example.com") and llama.send_resolved is True
    assert infra.smtp_url == SecretName(block="infra-smtp") and infra.email_to == ("infra@example.com",)
    assert infra.channels == (ChannelName.EMAIL,) and infra.send_resolved is None
    assert [target for target, _ in infra.targets] == ["infra/email"]
    assert [target for target, _ in table.default.targets] == ["slack", "email"]
    assert [route.line for route in table.routes] == [11, 16, 20]


ROUTING = [
    ("a llama job: its team, then on (continue) to the next match", labels("llama-8r-0142", name="llama-8r"),
     ["llama-team"]),
    ("a llama regression: its team and infra", labels("llama-8r-0142", name="llama-8r", kind=AlertKind.REGRESSION),
     ["llama-team", "infra"]),
    ("a suspect device: infra", labels("", name="", kind=AlertKind.SUSPECT_HOST, severity=Severity.WARNING),
     ["infra"]),
    ("a critical bert: the default, named by a route", labels("bert-large-7", name="bert-large"), ["default"]),
    ("a warning bert: no route matches, the default", labels("bert-large-7", name="bert-large",
                                                             severity=Severity.WARNING), ["default"]),
    ("anything else: the default", labels(), ["default"]),
]


@pytest.mark.parametrize(("case", "alert", "expected"), ROUTING, ids=[case[0] for case in ROUTING])
def test_first_match_wins_unless_continue(table: RouteTable, case: str, alert: Labels, expected: list[str]) -> None:
    assert [receiver.name for receiver in table.receivers_for(alert)] == expected


def test_no_routes_file_sends_everything_to_the_default() -> None:
    assert RouteTable.only(DEFAULT).receivers_for(labels("llama-1", name="llama")) == (DEFAULT,)
    empty = parse_routes("", file=FILE, default=DEFAULT)
    assert empty.routes == () and empty.receivers_for(labels()) == (DEFAULT,)


ERRORS = [
    ("toml syntax", '[receivers.a]\nslack_webhook_env = "X"\n[[routes]\n', 3, "not valid TOML"),
    ("a secret in the file", '[receivers.a]\nemail_to = "a@x.org"\nslack_webhook = "https://hooks/x"\n', 3,
     "would put a secret in the file"),
    ("an unknown receiver key", '[receivers.a]\nslack_webhook_env = "X"\nchannel = "#gpu"\n', 3,
     "unknown key 'channel'"),
    ("an unknown route key", '[[routes]]\nreceiver = "default"\n\n[[routes]]\njobs = "x*"\nreceiver = "default"\n',
     5, "route 2: unknown key 'jobs'"),
    ("an unknown receiver", '[[routes]]\njob = "x*"\nreceiver = "nobody"\n', 3, "unknown receiver 'nobody'"),
    ("a route without receiver", '[[routes]]\njob = "x*"\n', 1, "route 1: needs a receiver"),
    ("a bad severity", '[[routes]]\nseverity = ["fatal"]\nreceiver = "default"\n', 2, "'fatal' is not one of"),
    ("a bad kind", '[[routes]]\nkind = "oops"\nreceiver = "default"\n', 2, "kind 'oops' is not one of"),
    ("continue not a boolean", '[[routes]]\nreceiver = "default"\ncontinue = "yes"\n', 3, "continue must be"),
    ("a receiver with no channel", '[receivers.quiet]\nsend_resolved = true\n', 1, "needs a Slack webhook"),
    ("a bad address", '[receivers.a]\nemail_to = ["not-an-address"]\n', 2, "is not an email address"),
    ("a bad env name", '[receivers.a]\nslack_webhook_env = "https://x"\n', 2, "must name an environment variable"),
    ("the default redefined", '[receivers.default]\nslack_webhook_env = "X"\n', 1, "not 'default'"),
    ("an unknown top-level key", 'receiver = "x"\n', 1, "unknown top-level key 'receiver'"),
    ("empty matcher list", '[[routes]]\njob = []\nreceiver = "default"\n', 2, "job must be a non-empty string"),
]


@pytest.mark.parametrize(("case", "text", "line", "message"), ERRORS, ids=[case[0] for case in ERRORS])
def test_malformed_files_name_the_file_and_line(case: str, text: str, line: int, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_routes(text, file=FILE, default=DEFAULT)
    assert caught.value.file == FILE and caught.value.line == line, str(caught.value)
    assert message in str(caught.value) and str(caught.value).startswith(f"{FILE} line {line}: ")
    assert "hooks/x" not in str(caught.value)  # a secret put in the file by mistake is never quoted


def test_email_without_any_smtp_server_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"line 2: receiver 'a': lists email_to but no SMTP server"):
        parse_routes('[receivers.a]\nemail_to = ["a@example.com"]\n', file=FILE, default=NO_SMTP)


def test_the_documented_example_parses() -> None:
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[3] / "docs" / "alerting.md").read_text()
    example = re.search(r"```toml\n(.*?)```", readme, re.DOTALL)
    assert example is not None
    table = parse_routes(example.group(1), file="docs/alerting.md", default=DEFAULT)
    assert [route.receiver for route in table.routes] == ["llama-team", "infra", "default"]
    regression = labels("llama-8r-0142", name="llama-8r", kind=AlertKind.REGRESSION)
    assert [receiver.name for receiver in table.receivers_for(regression)] == ["llama-team"]
    device = labels("", name="", kind=AlertKind.SUSPECT_HOST)
    assert [receiver.name for receiver in table.receivers_for(device)] == ["infra", "default"]
