// emptyDir guard monitoring mixin: the rules of rules/emptydir-guard.rules.yml and the
// dashboards of dashboards/*.json, with their scrape-job selectors and runbook links set by
// _config. Written by hand; rules.json and dashboards/*.json are generated
// (cd dashboards/generator && go run .). See README.md.
local rules = import 'rules.json';
// One line per file of dashboards/ (the tests fail when one is missing here).
local dashboards = {
  'emptydir-fleet.json': import 'dashboards/emptydir-fleet.json',
  'emptydir-namespace.json': import 'dashboards/emptydir-namespace.json',
  'emptydir-pod.json': import 'dashboards/emptydir-pod.json',
  'emptydir-remediator.json': import 'dashboards/emptydir-remediator.json',
};

// What the shipped rules and dashboards say: _config's defaults, and the strings replaced.
local shipped = {
  exporterSelector: 'job=~".*emptydir-exporter.*"',
  remediatorSelector: 'job=~".*emptydir-remediator.*"',
  runbookURLBase: 'https://github.com/emptydir-guard/emptydir-guard/blob/main/docs/runbook.md',
  // EmptyDirExporterDown's description quotes the exporter's job regex.
  exporterPhrase: 'whose job matches ".*emptydir-exporter.*"',
};

// Plain string replacement, never `%` formatting: the annotations hold Go templates with %q.
local replace(s, cfg) =
  local selectors = std.strReplace(
    std.strReplace(s, shipped.exporterSelector, cfg.exporterSelector),
    shipped.remediatorSelector,
    cfg.remediatorSelector
  );
  local phrase =
    if cfg.exporterSelector == shipped.exporterSelector then selectors
    else std.strReplace(selectors, shipped.exporterPhrase, 'matching {' + cfg.exporterSelector + '}');
  std.strReplace(phrase, shipped.runbookURLBase, std.rstripChars(cfg.runbookURLBase, '/'));

// Every string of v (exprs, annotations, dashboard queries) through replace.
local configure(v, cfg) =
  if std.isString(v) then replace(v, cfg)
  else if std.isArray(v) then [configure(e, cfg) for e in v]
  else if std.isObject(v) then { [k]: configure(v[k], cfg) for k in std.objectFields(v) }
  else v;

local hasAlert(group) = std.length([r for r in group.rules if std.objectHas(r, 'alert')]) > 0;

{
  _config+:: {
    // Label matchers of the exporter's and the remediator's scrape jobs (the rules'
    // EmptyDirExporterDown; the dashboards' up, leader and target panels).
    exporterSelector: shipped.exporterSelector,
    remediatorSelector: shipped.remediatorSelector,
    // docs/runbook.md of your copy; each runbook_url appends #<alert name in lower case>.
    runbookURLBase: shipped.runbookURLBase,
  },

  local cfg = self._config,

  prometheusAlerts+:: {
    groups+: [configure(g, cfg) for g in rules.groups if hasAlert(g)],
  },
  prometheusRules+:: {
    groups+: [configure(g, cfg) for g in rules.groups if !hasAlert(g)],
  },
  grafanaDashboards+:: {
    [name]: configure(dashboards[name], cfg)
    for name in std.objectFields(dashboards)
  },
}
