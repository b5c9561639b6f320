// Reading a Grafana dashboard (deploy/grafana/*.json) as a test must: its panels, the PromQL
// each one asks, and that PromQL with Grafana's variables replaced, so that a plain Prometheus
// can answer it. Grafana itself is not in Debian 12; this is the part of it the tests need.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hc::integ {

// One query of a dashboard: the panel's (or variable's) title, the target's refId, its PromQL as
// written (with $variables).
struct DashboardQuery {
  std::string where;
  std::string refId;
  std::string expr;
};

// The dashboard at path; discarded (is_discarded()) when it is not JSON.
nlohmann::json loadDashboard(const std::string& path);

// Every panel that shows data: rows' collapsed panels included, rows themselves left out.
std::vector<const nlohmann::json*> dataPanels(const nlohmann::json& dashboard);

// What would keep the dashboard from importing and showing data, one sentence each: a panel
// without a datasource naming the dashboard's Prometheus datasource variable, without targets,
// a target without an expression, repeated panel ids. Empty when there is nothing.
std::vector<std::string> dashboardProblems(const nlohmann::json& dashboard);

// Every target of every data panel.
std::vector<DashboardQuery> panelQueries(const nlohmann::json& dashboard);
// Each query variable `label_values(METRIC, LABEL)` as the PromQL that finds the same values,
// `count by (LABEL) (METRIC)`; a variable of another form is a problem.
std::vector<DashboardQuery> variableQueries(const nlohmann::json& dashboard,
                                            std::vector<std::string>* problems);

// The values Grafana would put in place of each variable with every value selected: a query
// variable's allValue (its regex for "All"), and rateInterval for $__rate_interval.
using VariableValues = std::map<std::string, std::string>;
VariableValues allSelected(const nlohmann::json& dashboard, const std::string& rateInterval);

// expr with every $name and ${name} replaced from values. False, with *unknown naming it, for a
// variable that has no value: a misspelt name, which Grafana would leave in place.
bool substituteVariables(const std::string& expr, const VariableValues& values, std::string* out,
                         std::string* unknown);

// The hetero_comm_* names expr mentions (histogram series with their _bucket suffix).
std::vector<std::string> metricNames(const std::string& expr);

}  // namespace hc::integ
