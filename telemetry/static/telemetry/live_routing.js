// The "Live routing" admin page: one row per routing decision from /ws/routing/
// (spec 06 §4.2), newest first, at most data-max-rows rows.  Text only goes in
// through textContent: requested models and session ids come from API clients.
// Filters (key, model, route, failed only) hide rows without dropping them; Pause
// holds new decisions until Resume (issue #15).
(function () {
  "use strict";

  const table = document.getElementById("live-routing");
  if (!table) {
    return;
  }
  const body = table.tBodies[0];
  const status = document.getElementById("live-status");
  const droppedNote = document.getElementById("live-dropped");
  const held = document.getElementById("live-held");
  const pause = document.getElementById("live-pause");
  const filters = {
    key: document.getElementById("filter-key"),
    model: document.getElementById("filter-model"),
    route: document.getElementById("filter-route"),
    failed: document.getElementById("filter-failed"),
  };
  const maxRows = parseInt(table.dataset.maxRows, 10) || 100;
  const socketPath = table.dataset.socketPath || "/ws/routing/";
  const logUrl = table.dataset.logUrl || "/admin/telemetry/requestlog/";
  const RETRY_MIN_MS = 1000;
  const RETRY_MAX_MS = 30000;
  let retryMs = RETRY_MIN_MS;
  let droppedTotal = 0;
  let paused = false;
  const waiting = [];
  let connectedText = "Connected: new decisions appear at the top.";

  function setStatus(state, text) {
    status.dataset.state = state;
    status.textContent = text;
  }

  function show(value) {
    return value === null || value === undefined || value === "" ? "—" : String(value);
  }

  function addCell(row, value, className) {
    const cell = row.insertCell();
    cell.textContent = show(value);
    if (className) {
      cell.className = className;
    }
    return cell;
  }

  function pad(n) {
    return (n < 10 ? "0" : "") + n;
  }

  function localTime(iso) {
    const d = new Date(iso);
    if (isNaN(d)) {
      return iso || "";
    }
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) +
      " " + pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
  }

  function attemptText(attempt) {
    const parts = [attempt.target, attempt.result];
    if (attempt.http_status) {
      parts.push(String(attempt.http_status));
    }
    if (attempt.latency_ms !== null && attempt.latency_ms !== undefined) {
      parts.push(attempt.latency_ms + " ms");
    }
    return parts.join(" ");
  }

  function tierText(message) {
    if (!message.smart_alias) {
      return null;
    }
    let text = message.smart_alias + ": " + show(message.tier);
    if (message.tier_score !== null && message.tier_score !== undefined) {
      text += " (" + message.tier_score + ")";
    }
    return text + " → " + show(message.tier_target);
  }

  function failed(message) {
    return message.status !== "success";
  }

  function contains(value, needle) {
    return String(value || "").toLowerCase().indexOf(needle) !== -1;
  }

  function matches(row) {
    const key = filters.key.value.trim().toLowerCase();
    const model = filters.model.value.trim().toLowerCase();
    const route = filters.route.value.trim().toLowerCase();
    const d = row.dataset;
    if (key && !contains(d.key, key) && !contains(d.keyPrefix, key)) {
      return false;
    }
    if (model && !contains(d.requested, model) && !contains(d.served, model)) {
      return false;
    }
    if (route && !contains(d.route, route)) {
      return false;
    }
    return !(filters.failed.checked && d.failed !== "true");
  }

  function applyFilters() {
    for (const row of body.rows) {
      row.hidden = !matches(row);
    }
  }

  function addDecision(message) {
    const row = body.insertRow(0);
    row.dataset.requestId = message.request_id;
    row.dataset.key = message.api_key || "";
    row.dataset.keyPrefix = message.api_key_prefix || "";
    row.dataset.requested = message.requested_model || "";
    row.dataset.served = message.served_model || "";
    row.dataset.route = message.route || "";
    row.dataset.failed = String(failed(message));
    row.className = "decision status-" + message.status + (failed(message) ? " failed" : "");
    const when = addCell(row, localTime(message.ts));
    when.title = message.ts || "";
    const idCell = row.insertCell();
    idCell.className = "request-id";
    const link = document.createElement("a");
    link.href = logUrl + encodeURIComponent(message.request_id || "") + "/change/";
    link.textContent = (message.request_id || "").slice(0, 8);
    link.title = "Open in the request log";
    idCell.append(link);
    const key = addCell(row, message.api_key || message.api_key_prefix, "key");
    key.title = message.api_key_prefix || "";
    const models = addCell(
      row,
      show(message.requested_model) + " → " + show(message.served_model),
      "models"
    );
    const tier = tierText(message);
    models.title = (message.session_id ? "session " + message.session_id + "\n" : "") +
      (tier ? "smart " + tier : "");
    addCell(row, show(message.route) + (message.strategy ? " (" + message.strategy + ")" : ""), "route");
    addCell(row, message.status + " " + show(message.http_status), "status");
    addCell(row, show(message.latency_ms) + " / " + show(message.ttft_ms) + " ms", "latency");
    addCell(
      row,
      message.cost_usd === null || message.cost_usd === undefined
        ? null
        : Number(message.cost_usd).toFixed(6)
    );
    const attempts = row.insertCell();
    attempts.className = "attempts";
    const list = message.attempts || [];
    const details = document.createElement("details");
    const summary = document.createElement("summary");
    summary.textContent = list.length + (list.length === 1 ? " attempt" : " attempts");
    const lines = document.createElement("pre");
    lines.textContent = list.map(attemptText).join("\n");
    details.append(summary, lines);
    if (message.auto_decision) {
      const auto = document.createElement("pre");
      auto.textContent = "auto: " + JSON.stringify(message.auto_decision, null, 2);
      details.append(auto);
    }
    attempts.append(details);
    row.hidden = !matches(row);
    while (body.rows.length > maxRows) {
      body.deleteRow(-1);
    }
  }

  function showHeld() {
    held.hidden = waiting.length === 0;
    held.textContent = waiting.length + " new decision(s) held while paused";
  }

  function receive(message) {
    if (paused) {
      waiting.push(message);
      if (waiting.length > maxRows) {
        waiting.shift();
      }
      showHeld();
      return;
    }
    addDecision(message);
  }

  pause.addEventListener("click", function () {
    paused = !paused;
    pause.dataset.paused = String(paused);
    pause.textContent = paused ? "Resume" : "Pause";
    if (paused) {
      setStatus("paused", "Paused: new decisions are held.");
      return;
    }
    while (waiting.length) {
      addDecision(waiting.shift());
    }
    showHeld();
    setStatus("open", connectedText);
  });
  for (const name of ["key", "model", "route"]) {
    filters[name].addEventListener("input", applyFilters);
  }
  filters.failed.addEventListener("change", applyFilters);

  function noteDropped(count) {
    droppedTotal += count;
    droppedNote.hidden = false;
    droppedNote.textContent =
      droppedTotal + " decisions not shown (over 50 a second for this page).";
  }

  function connect() {
    const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
    const socket = new WebSocket(scheme + "//" + window.location.host + socketPath);
    setStatus("connecting", "Connecting…");
    socket.addEventListener("open", function () {
      retryMs = RETRY_MIN_MS;
      if (!paused) {
        setStatus("open", connectedText);
      }
    });
    socket.addEventListener("message", function (event) {
      let message;
      try {
        message = JSON.parse(event.data);
      } catch (error) {
        return;
      }
      if (message.type === "routing_decision") {
        receive(message);
      } else if (message.type === "dropped") {
        noteDropped(message.count || 0);
      }
    });
    socket.addEventListener("close", function (event) {
      if (event.code === 4403) {
        setStatus("forbidden", "Closed: staff only (4403). Log in again to watch.");
        return;
      }
      setStatus(
        "closed",
        "Disconnected (" + event.code + "); retrying in " + retryMs / 1000 + " s…"
      );
      window.setTimeout(connect, retryMs);
      retryMs = Math.min(retryMs * 2, RETRY_MAX_MS);
    });
  }

  connect();
})();
