// The page talks only to docket's own API and renders every value as text (textContent),
// never as HTML.
"use strict";

async function refreshQueue() {
  const error = document.getElementById("queue-error");
  try {
    const response = await fetch("/api/queue/stats");
    if (!response.ok) throw new Error(`the server answered ${response.status}`);
    const stats = await response.json();
    const body = document.querySelector("#queue-stats tbody");
    body.replaceChildren(...stats.kinds.map((k) => {
      const row = document.createElement("tr");
      for (const value of [k.kind, k.ready, k.running, k.done, k.dead, k.cancelled]) {
        const cell = document.createElement("td");
        cell.textContent = String(value);
        row.append(cell);
      }
      return row;
    }));
    const age = stats.oldest_due_age_seconds;
    document.getElementById("oldest-due").textContent = age == null ? "none" : `${age.toFixed(1)} s`;
    error.hidden = true;
  } catch (err) {
    error.textContent = `Could not load the queue: ${err.message}`;
    error.hidden = false;
  }
}

refreshQueue();
setInterval(refreshQueue, 5000);
