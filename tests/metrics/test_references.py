"""The docs, the alert rules and the sample Grafana dashboard name only metrics that exist."""

from __future__ import annotations

import json
import re
from pathlib import Path

from backwave_django.metrics import names

DOCS = Path(__file__).resolve().parents[2] / "docs"
METRIC = re.compile(r"\bbackwave_[a-z_]+")
#: Names in the text that are not metrics: the package, its modules, its worker command.
NOT_METRICS = re.compile(r"^backwave_(django|worker|manifest|job_(claim|awaiting|leased|purge|failures))$")


def _section(title: str) -> str:
    text = (DOCS / "operations.md").read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def _referenced(text: str) -> set[str]:
    return {name for name in METRIC.findall(text) if not NOT_METRICS.match(name)}


def test_every_metric_the_alert_rules_use_exists():
    rules = _section("Alerts").split("```yaml", 1)[1].split("```", 1)[0]
    expressions = "\n".join(line for line in rules.splitlines() if line.strip().startswith("expr:"))
    used = _referenced(expressions)
    assert used, "no metric found in the alert rules"
    assert used <= names.exposed_names(), used - names.exposed_names()


def test_every_metric_the_dashboard_uses_exists():
    dashboard = json.loads((DOCS / "grafana" / "backwave.json").read_text())
    expressions = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    expressions.append(dashboard["templating"]["list"][0]["query"]["query"])
    used = _referenced("\n".join(expressions))
    assert used <= names.exposed_names(), used - names.exposed_names()
    # Every metric has a panel.
    assert {spec.name for spec in names.ALL_METRICS} <= {
        name.removesuffix("_bucket") for name in used
    }


def test_the_metrics_section_documents_every_metric_and_names_no_other():
    section = _section("Metrics")
    documented = {row.split("`")[1] for row in section.splitlines() if row.startswith("| `backwave_")}
    assert documented == {spec.name for spec in names.ALL_METRICS}
    families = {spec.name for spec in names.ALL_METRICS}  # a histogram's own name, beside its samples
    assert _referenced(section) <= names.exposed_names() | families
