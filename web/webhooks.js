// The webhooks view: register an endpoint (its secret shown once), see each endpoint's recent
// deliveries, retry a dead one, delete an endpoint. Loaded after app.js (its helpers); every
// string from the server is rendered as text.
"use strict";

function deliveryRow(webhook, delivery) {
  const row = el("tr");
  row.dataset.deliveryId = delivery.id;
  row.dataset.status = delivery.status;
  const actions = el("td");
  if (delivery.status === "dead") {
    const retry = el("button", "Retry");
    retry.type = "button";
    retry.setAttribute("aria-label", `Retry delivery ${delivery.id}`);
    retry.addEventListener("click", async () => {
      retry.disabled = true;
      try {
        await api(`/api/webhooks/${webhook.id}/deliveries/${delivery.id}/retry`, { method: "POST" });
        $("webhook-status").textContent = "The delivery is queued again.";
      } catch (err) {
        reportError("Could not retry the delivery", err);
      }
      refreshWebhooks();
    });
    actions.append(retry);
  }
  row.append(
    el("td", delivery.event_type),
    el("td", delivery.status, `status status-${delivery.status}`),
    el("td", delivery.attempts),
    el("td", delivery.last_error || "–"),
    el("td", formatTime(delivery.created_at)),
    actions,
  );
  return row;
}

async function webhookItem(webhook) {
  const item = el("li");
  item.dataset.webhookId = String(webhook.id);
  item.append(el("h3", webhook.url, "name"));
  item.append(el("p", `Events: ${webhook.events.join(", ")}`));
  const { deliveries } = await api(`/api/webhooks/${webhook.id}/deliveries`);
  if (deliveries.length === 0) {
    item.append(el("p", "No deliveries yet."));
  } else {
    const table = el("table");
    table.append(el("caption", "Recent deliveries, newest first", "visually-hidden"));
    const head = el("tr");
    for (const name of ["Event", "Status", "Attempts", "Last error", "Created", ""]) {
      const th = el("th", name);
      th.scope = "col";
      head.append(th);
    }
    const thead = el("thead");
    thead.append(head);
    const body = el("tbody");
    body.append(...deliveries.map((d) => deliveryRow(webhook, d)));
    table.append(thead, body);
    const scroll = el("div", null, "scroll");
    scroll.append(table);
    item.append(scroll);
  }
  const remove = el("button", "Delete webhook");
  remove.type = "button";
  remove.addEventListener("click", async () => {
    try {
      await api(`/api/webhooks/${webhook.id}`, { method: "DELETE" });
    } catch (err) {
      reportError("Could not delete the webhook", err);
    }
    refreshWebhooks();
  });
  item.append(remove);
  return item;
}

async function refreshWebhooks() {
  try {
    const { webhooks, events } = await api("/api/webhooks");
    const box = $("webhook-events");
    if (box.querySelectorAll("input").length === 0) {
      for (const name of events) {
        const label = el("label");
        const input = el("input");
        input.type = "checkbox";
        input.name = "events";
        input.value = name;
        label.append(input, ` ${name}`);
        box.append(label);
      }
    }
    const items = await Promise.all(webhooks.map(webhookItem));
    $("webhook-list").replaceChildren(...items);
    $("webhooks-empty").hidden = webhooks.length > 0;
  } catch (err) {
    reportError("Could not load the webhooks", err);
  }
}

$("webhook-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const events = Array.from(document.querySelectorAll('#webhook-events input:checked')).map((i) => i.value);
  try {
    const created = await api("/api/webhooks", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ url: $("webhook-url").value, events }),
    });
    $("webhook-secret").textContent = created.secret;
    $("webhook-secret-box").hidden = false;
    $("webhook-status").textContent = "Registered. Keep the secret: receivers verify signatures with it.";
    $("webhook-url").value = "";
  } catch (err) {
    $("webhook-secret-box").hidden = true;
    $("webhook-status").textContent = `Not registered: ${err.message}`;
  }
  refreshWebhooks();
});
