#include "tests/integration/grafana_dashboard.h"

#include <cctype>
#include <fstream>
#include <regex>
#include <set>

namespace hc::integ {
namespace {

using nlohmann::json;

// j[key] when it is an array, else an empty one; by reference, so that pointers into it stay
// valid as long as j (json::value() would return a copy).
const json& arrayMember(const json& j, const char* key) {
  static const json kEmpty = json::array();
  const auto it = j.is_object() ? j.find(key) : j.end();
  return it != j.end() && it->is_array() ? *it : kEmpty;
}

// The dashboard's variables.
const json& variables(const json& dashboard) {
  static const json kNone = json::object();
  const auto it = dashboard.find("templating");
  return arrayMember(it != dashboard.end() ? *it : kNone, "list");
}

// A datasource variable of the dashboard that lists Prometheus datasources.
bool isPrometheusDatasourceVariable(const json& dashboard, const std::string& name) {
  for (const json& v : variables(dashboard)) {
    if (v.value("type", "") == "datasource" && v.value("query", "") == "prometheus" &&
        v.value("name", "") == name) {
      return true;
    }
  }
  return false;
}

// "${name}" or "$name" -> name; "" for a fixed uid.
std::string variableName(const std::string& uid) {
  if (uid.starts_with("${") && uid.ends_with("}")) return uid.substr(2, uid.size() - 3);
  if (uid.starts_with("$")) return uid.substr(1);
  return "";
}

// Why `datasource` is not the dashboard's Prometheus variable; "" when it is.
std::string datasourceProblem(const json& dashboard, const json& datasource) {
  if (!datasource.is_object()) return "no datasource";
  if (datasource.value("type", "") != "prometheus") return "datasource type is not prometheus";
  const std::string name = variableName(datasource.value("uid", ""));
  if (!isPrometheusDatasourceVariable(dashboard, name)) {
    return "datasource uid '" + datasource.value("uid", "") +
           "' is not a Prometheus datasource variable of the dashboard";
  }
  return "";
}

void collectPanels(const json& list, std::vector<const json*>* out) {
  for (const json& panel : list) {
    if (panel.value("type", "") == "row") {
      collectPanels(arrayMember(panel, "panels"), out);
    } else {
      out->push_back(&panel);
    }
  }
}

std::string queryText(const json& variable) {
  const json q = variable.value("query", json());
  return q.is_object() ? q.value("query", "") : q.is_string() ? q.get<std::string>() : "";
}

}  // namespace

json loadDashboard(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in, nullptr, /*allow_exceptions=*/false);
}

std::vector<const json*> dataPanels(const json& dashboard) {
  std::vector<const json*> out;
  collectPanels(arrayMember(dashboard, "panels"), &out);
  return out;
}

std::vector<std::string> dashboardProblems(const json& dashboard) {
  std::vector<std::string> problems;
  std::set<int> ids;
  for (const json* panel : dataPanels(dashboard)) {
    const std::string title = "panel '" + panel->value("title", "") + "': ";
    if (!ids.insert(panel->value("id", -1)).second) problems.push_back(title + "repeated id");
    if (const std::string why = datasourceProblem(dashboard, panel->value("datasource", json()));
        !why.empty())
      problems.push_back(title + why);
    const json& targets = arrayMember(*panel, "targets");
    if (targets.empty()) problems.push_back(title + "no targets");
    for (const json& target : targets) {
      if (target.value("expr", "").empty()) {
        problems.push_back(title + "target " + target.value("refId", "?") + " has no expr");
      }
      if (target.contains("datasource") &&
          target.value("datasource", json()) != panel->value("datasource", json())) {
        problems.push_back(title + "target " + target.value("refId", "?") +
                           " asks another datasource than its panel");
      }
    }
  }
  return problems;
}

std::vector<DashboardQuery> panelQueries(const json& dashboard) {
  std::vector<DashboardQuery> out;
  for (const json* panel : dataPanels(dashboard)) {
    for (const json& target : arrayMember(*panel, "targets")) {
      out.push_back({"panel '" + panel->value("title", "") + "'", target.value("refId", ""),
                     target.value("expr", "")});
    }
  }
  return out;
}

std::vector<DashboardQuery> variableQueries(const json& dashboard,
                                            std::vector<std::string>* problems) {
  static const std::regex kLabelValues(R"(^\s*label_values\(\s*(.+)\s*,\s*(\w+)\s*\)\s*$)");
  std::vector<DashboardQuery> out;
  for (const json& v : variables(dashboard)) {
    if (v.value("type", "") != "query") continue;
    const std::string where = "variable '" + v.value("name", "") + "'";
    const std::string text = queryText(v);
    std::smatch m;
    if (!std::regex_match(text, m, kLabelValues)) {
      problems->push_back(where + ": not label_values(METRIC, LABEL): " + text);
      continue;
    }
    out.push_back({where, "", "count by (" + m[2].str() + ") (" + m[1].str() + ")"});
  }
  return out;
}

VariableValues allSelected(const json& dashboard, const std::string& rateInterval) {
  VariableValues values = {{"__rate_interval", rateInterval}};
  for (const json& v : variables(dashboard)) {
    if (v.value("type", "") == "query" && v.value("includeAll", false)) {
      values[v.value("name", "")] = v.value("allValue", "");
    }
  }
  return values;
}

bool substituteVariables(const std::string& expr, const VariableValues& values, std::string* out,
                         std::string* unknown) {
  out->clear();
  for (size_t i = 0; i < expr.size();) {
    if (expr[i] != '$') {
      *out += expr[i++];
      continue;
    }
    // $name runs over [A-Za-z0-9_]; ${name} up to the brace.
    const bool braced = i + 1 < expr.size() && expr[i + 1] == '{';
    size_t end = i + (braced ? 2 : 1);
    while (end < expr.size() &&
           (std::isalnum(static_cast<unsigned char>(expr[end])) || expr[end] == '_')) {
      ++end;
    }
    const std::string name = expr.substr(i + (braced ? 2 : 1), end - i - (braced ? 2 : 1));
    const auto value = values.find(name);
    if (value == values.end() || (braced && (end >= expr.size() || expr[end] != '}'))) {
      *unknown = expr.substr(i, end - i + (braced ? 1 : 0));
      return false;
    }
    *out += value->second;
    i = end + (braced ? 1 : 0);
  }
  return true;
}

std::vector<std::string> metricNames(const std::string& expr) {
  static const std::regex kName(R"(\bhetero_comm_[A-Za-z0-9_]*)");
  std::set<std::string> names;
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), kName);
       it != std::sregex_iterator(); ++it) {
    names.insert(it->str());
  }
  return {names.begin(), names.end()};
}

}  // namespace hc::integ
