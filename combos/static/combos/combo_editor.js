/* Combo editor: an ordered table of targets (add, remove, move up/down) over the
 * "Targets" textarea, and the "Strategy options" fields of the chosen strategy.
 * Progressive enhancement: the textarea and every option field stay what the server
 * validates, so the form works without JavaScript (all option fields then show) and
 * every error still lands on its field. An option field's widget names the strategies
 * that read it in data-strategies (from the validator's CONFIG_USERS); the server only
 * saves the options the chosen strategy reads, so hiding the others loses nothing. */
(function () {
  "use strict";
  // Keys without a field of their own, typed into "Other config" (spec 04 §2.2).
  var OTHER_KEYS = {
    "auto": ["auto.{weights | modePack, candidatePool, explorationRate, budgetCap, ...}",
             "routerStrategy"]
  };

  function parseLine(line) {
    var parts = line.trim().split(/\s+/), head = parts.shift() || "", row = {};
    if (head.toLowerCase().indexOf("combo:") === 0) { row.combo = head.slice(6); }
    else { var at = head.indexOf("@"); row.model = at < 0 ? head : head.slice(0, at);
           row.connection = at < 0 ? "" : head.slice(at + 1); }
    parts.forEach(function (p) { var kv = p.split("="); row[kv[0]] = kv[1] || ""; });
    return row;
  }

  function formatRow(row) {
    var head = row.combo !== undefined ? "combo:" + row.combo
      : row.model + (row.connection ? "@" + row.connection : "");
    var out = [head];
    if (row.weight) { out.push("weight=" + row.weight); }
    if (row.timeout_ms && row.combo === undefined) { out.push("timeout_ms=" + row.timeout_ms); }
    return out.join(" ");
  }

  function input(value, placeholder, onChange) {
    var el = document.createElement("input");
    el.type = "text"; el.value = value || ""; el.placeholder = placeholder;
    el.size = placeholder.length > 12 ? 28 : 10;
    el.addEventListener("input", function () { onChange(el.value); });
    return el;
  }

  function button(label, title, onClick) {
    var el = document.createElement("button");
    el.type = "button"; el.textContent = label; el.title = title;
    el.addEventListener("click", onClick);
    return el;
  }

  // The cells the server found wrong ([{row (from 1), cell, message}]): each marked
  // alone, until the rows are rearranged or the cell is edited.
  function badCells(textarea) {
    try { return JSON.parse(textarea.getAttribute("data-bad-cells") || "[]"); }
    catch (e) { return []; }
  }

  function mark(el, problem) {
    el.classList.add("omr-bad-cell");
    el.setAttribute("aria-invalid", "true");
    el.title = problem.message;
    el.addEventListener("input", function () {
      el.classList.remove("omr-bad-cell"); el.removeAttribute("aria-invalid"); el.title = "";
    }, {once: true});
  }

  function editor(textarea) {
    var rows = textarea.value.split("\n").filter(function (l) { return l.trim(); })
      .map(parseLine);
    var bad = badCells(textarea);
    var table = document.createElement("table");
    table.className = "combo-targets";
    function sync() { textarea.value = rows.map(formatRow).join("\n"); }
    function render() {
      table.innerHTML = "<thead><tr><th>#</th><th>model or combo:NAME</th>" +
        "<th>connection</th><th>weight</th><th>timeout_ms</th><th></th></tr></thead>";
      var body = document.createElement("tbody");
      rows.forEach(function (row, i) {
        var tr = document.createElement("tr"), cells = [];
        var target = row.combo !== undefined ? "combo:" + row.combo : row.model;
        cells.push(document.createTextNode(String(i + 1)));
        var targetInput = input(target, "provider/model", function (v) {
          if (v.toLowerCase().indexOf("combo:") === 0) { row.combo = v.slice(6); delete row.model; }
          else { row.model = v; delete row.combo; }
          sync();
        });
        // suggestions from the catalog: every provider/model and combo:NAME (issue #15)
        if (document.getElementById("omr-routes")) { targetInput.setAttribute("list", "omr-routes"); }
        cells.push(targetInput);
        cells.push(input(row.connection, "any", function (v) { row.connection = v; sync(); }));
        cells.push(input(row.weight, "weight", function (v) { row.weight = v; sync(); }));
        cells.push(input(row.timeout_ms, "timeout_ms", function (v) { row.timeout_ms = v; sync(); }));
        var columns = {target: cells[1], connection: cells[2], weight: cells[3], timeout_ms: cells[4]};
        bad.forEach(function (problem) {
          if (problem.row === i + 1 && columns[problem.cell]) { mark(columns[problem.cell], problem); }
        });
        tr.setAttribute("data-row", String(i + 1));
        var tools = document.createElement("span");
        tools.appendChild(button("↑", "move up", function () {
          if (i > 0) { rows.splice(i - 1, 0, rows.splice(i, 1)[0]); sync(); render(); }
        }));
        tools.appendChild(button("↓", "move down", function () {
          if (i < rows.length - 1) { rows.splice(i + 1, 0, rows.splice(i, 1)[0]); sync(); render(); }
        }));
        tools.appendChild(button("✕", "remove", function () { rows.splice(i, 1); sync(); render(); }));
        cells.push(tools);
        cells.forEach(function (c) { var td = document.createElement("td"); td.appendChild(c); tr.appendChild(td); });
        body.appendChild(tr);
      });
      table.appendChild(body);
      bad = [];  // rows move or go: the marks no longer point at their cells
    }
    render();
    var add = button("Add target", "append a target", function () {
      rows.push({model: "", connection: ""}); sync(); render();
    });
    textarea.parentNode.insertBefore(table, textarea);
    textarea.parentNode.insertBefore(add, textarea);
    textarea.style.display = "none";
  }

  function strategyOptions(select) {
    var widgets = Array.prototype.slice.call(document.querySelectorAll("[data-strategies]"));
    if (!widgets.length) { return; }
    var fieldset = widgets[0].closest("fieldset");
    var none = document.createElement("p");
    none.className = "help combo-no-options";
    none.textContent = "This strategy reads none of these options.";
    if (fieldset) { fieldset.appendChild(none); }
    function update() {
      var shown = 0;
      widgets.forEach(function (el) {
        var row = el.closest(".form-row") || el.parentNode;
        var used = el.getAttribute("data-strategies").split(" ").indexOf(select.value) >= 0;
        // A row with an error stays visible: the save cannot pass while it is hidden.
        row.style.display = used || row.classList.contains("errors") ? "" : "none";
        if (used) { shown += 1; }
      });
      none.style.display = shown ? "none" : "";
    }
    select.addEventListener("change", update);
    update();
  }

  function configHints(select, configField) {
    var hint = document.createElement("div");
    hint.className = "help combo-config-keys";
    configField.parentNode.appendChild(hint);
    function update() {
      var keys = OTHER_KEYS[select.value];
      hint.textContent = keys ? "Keys for " + select.value + ": " + keys.join("; ")
        : "No extra keys for " + select.value + ": its options are the fields above.";
    }
    select.addEventListener("change", update);
    update();
  }

  document.addEventListener("DOMContentLoaded", function () {
    var textarea = document.getElementById("id_targets_text");
    var select = document.getElementById("id_strategy");
    var config = document.getElementById("id_config_text");
    if (textarea) { editor(textarea); }
    if (select) { strategyOptions(select); }
    if (select && config) { configHints(select, config); }
  });
})();
