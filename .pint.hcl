# pint (github.com/cloudflare/pint) configuration for scripts/pint.sh, which
# runs `pint --offline lint alerts/slot_exporter.rules.yml`.
#
# No prometheus {} block: the checks that query a live server (series
# existence, scrape interval, metric types) are off, and pint runs its static
# checks (PromQL syntax and pitfalls, templates, duplicated rules) plus the
# conventions below. alerts/lint (go test ./alerts/...) checks the rest: the
# metric catalog, ranges of at least 4m, runbook anchors and test coverage.

rule {
  match {
    kind = "alerting"
  }

  label "severity" {
    severity = "bug"
    comment  = "critical pages, warning goes to a ticket queue, info is for dashboards"
    values   = ["critical", "warning", "info"]
    required = true
  }

  annotation "summary" {
    severity = "bug"
    required = true
  }

  annotation "description" {
    severity = "bug"
    required = true
  }

  annotation "runbook_url" {
    severity = "bug"
    required = true
    value    = "https://github\\.com/slotexporter/slot_exporter/blob/main/docs/runbook\\.md#slot[a-z]+"
  }
}

# A condition must hold for two 1m scrapes before it pages. SlotHoldsLost and
# SlotJobsLost are events (a counter jump seen once) and fire without `for`.
rule {
  match {
    kind = "alerting"
  }
  ignore {
    name = "(SlotHoldsLost|SlotJobsLost)"
  }

  for {
    severity = "bug"
    comment  = "at least two scrape intervals at a 1m scrape"
    min      = "2m"
  }
}

rule {
  match {
    kind = "recording"
  }

  name "[a-z_]+:[a-z_]+:[a-z0-9_]+" {
    severity = "bug"
    comment  = "recording rules are named level:metric:operations"
  }
}
