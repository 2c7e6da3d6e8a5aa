// The console's only script: it refreshes the live part of the page without a reload, says when the store
// (or the console) does not answer, and counts leases down. Everything it puts in the page is either the
// server's escaped HTML or set with textContent.
(() => {
  const refreshMs = Number(document.body.dataset.refreshMs) || 2000;
  const status = document.getElementById("status");
  const live = document.querySelector("[data-live]");
  let renderedAt = performance.now();
  // A form in the live part (approve / deny on a list) is not replaced while someone types in it: a refresh
  // would take their words away. Leaving the page, or sending the form, ends it.
  let typing = false;
  live?.addEventListener("input", () => {
    typing = true;
  });

  function duration(ms) {
    const s = Math.floor(ms / 1000);
    if (s < 60) return `${s}s`;
    if (s < 3600) return `${Math.floor(s / 60)}m${s % 60 > 0 ? `${s % 60}s` : ""}`;
    return `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m`;
  }

  function countDown() {
    const elapsed = performance.now() - renderedAt;
    for (const lease of document.querySelectorAll("[data-lease-left]")) {
      const left = Number(lease.dataset.leaseLeft) - elapsed;
      lease.textContent = left > 0 ? `${duration(left)} left` : `expired ${duration(-left)} ago`;
      lease.classList.toggle("expired", left <= 0);
    }
  }

  function say(text) {
    const banner = document.createElement("div");
    banner.className = "banner banner-down";
    banner.textContent = text;
    status.replaceChildren(banner);
  }

  async function refresh() {
    if (live === null || document.hidden || typing) return;
    try {
      const response = await fetch(live.dataset.live, { cache: "no-store", credentials: "same-origin" });
      const text = await response.text();
      if (response.ok) {
        live.innerHTML = text;
        live.classList.remove("stale");
        status.replaceChildren();
        renderedAt = performance.now();
        countDown();
      } else if (response.headers.get("x-once-store") === "unreachable") {
        status.innerHTML = text;
        live.classList.add("stale");
      } else {
        say(`The console answered ${response.status}: what is shown may be out of date.`);
        live.classList.add("stale");
      }
    } catch {
      say("The console does not answer: what is shown may be out of date. Trying again.");
      live.classList.add("stale");
    }
  }

  countDown();
  setInterval(countDown, 1000);
  setInterval(refresh, refreshMs);
})();
