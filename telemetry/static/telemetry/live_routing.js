// The "Live routing" admin page: one row per routing decision from /ws/routing/
// (spec 06 §4.2), newest first, at most data-max-rows rows.  Text only goes in
// through textContent: requested models and session ids come from API clients.
(function () {
  "use strict";

  const table = document.getElementById("live-routing");
  if (!table) {
    return;
  }
  const body = table.tBodies[0];
  const status = document.getElementById("live-status");
  const droppedNote = document.getElementById("live-dropped");
  const maxRows = parseInt(table.dataset.maxRows, 10) || 100;
  const socketPath = table.dataset.socketPath || "/ws/routing/";
  const RETRY_MIN_MS = 1000;
  const RETRY_MAX_MS = 30000;
  let retryMs = RETRY_MIN_MS;
  let droppedTotal = 0;

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

  function addDecision(message) {
    const row = body.insertRow(0);
    row.dataset.requestId = message.request_id;
    row.className = "decision status-" + message.status;
    addCell(row, (message.ts || "").replace("T", " ").replace("Z", ""));
    const id = addCell(row, (message.request_id || "").slice(0, 8), "request-id");
    id.title = message.request_id || "";
    addCell(row, message.api_key_prefix);
    const requested = addCell(row, message.requested_model, "requested-model");
    if (message.session_id) {
      requested.title = "session " + message.session_id;
    }
    addCell(row, message.route, "route");
    addCell(row, message.strategy);
    const tier = addCell(row, tierText(message), "tier");
    if (message.tier_signals && message.tier_signals.length) {
      tier.title = message.tier_source + ": " + message.tier_signals.join(", ");
    }
    addCell(row, message.served_model, "served-model");
    addCell(row, message.status, "status");
    addCell(row, message.http_status, "http-status");
    addCell(row, message.latency_ms, "latency");
    addCell(row, message.ttft_ms);
    addCell(
      row,
      message.cost_usd === null || message.cost_usd === undefined
        ? null
        : Number(message.cost_usd).toFixed(6)
    );
    addCell(row, (message.attempts || []).map(attemptText).join(" → "), "attempts");
    const auto = row.insertCell();
    if (message.auto_decision) {
      const details = document.createElement("details");
      const summary = document.createElement("summary");
      summary.textContent = "decision";
      const pre = document.createElement("pre");
      pre.textContent = JSON.stringify(message.auto_decision, null, 2);
      details.append(summary, pre);
      auto.append(details);
    } else {
      auto.textContent = "—";
    }
    while (body.rows.length > maxRows) {
      body.deleteRow(-1);
    }
  }

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
      setStatus("open", "Connected: new decisions appear at the top.");
    });
    socket.addEventListener("message", function (event) {
      let message;
      try {
        message = JSON.parse(event.data);
      } catch (error) {
        return;
      }
      if (message.type === "routing_decision") {
        addDecision(message);
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
