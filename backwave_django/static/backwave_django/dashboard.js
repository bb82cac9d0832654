/* Live refresh for the BackWave dashboard: fetch the fragment every few seconds and swap it in.
   Progressive enhancement only: without this script the page is complete and has a Reload link.
   Pauses while the tab is hidden; the Pause button's choice is kept for the browser tab. */
(function () {
  "use strict";

  var root = document.getElementById("bw-dashboard");
  var live = document.getElementById("bw-dashboard-live");
  if (!root || !live || !window.fetch) {
    return;
  }
  var toggle = document.getElementById("bw-refresh-toggle");
  var status = document.getElementById("bw-refresh-status");
  var reload = document.getElementById("bw-reload");
  var url = root.getAttribute("data-fragment-url");
  var interval = parseInt(root.getAttribute("data-refresh-ms"), 10) || 5000;
  var storageKey = "bw-dashboard-paused";
  var paused = false;
  var stopped = false;
  var timer = null;
  var pending = null;

  try {
    paused = window.sessionStorage.getItem(storageKey) === "1";
  } catch (error) {
    paused = false;
  }

  function say(text) {
    if (status) {
      status.textContent = text;
    }
  }

  function clock() {
    return new Date().toLocaleTimeString();
  }

  function describe() {
    if (stopped) {
      return;
    }
    say(paused ? "Live refresh paused." : "Live: refreshes every " + Math.round(interval / 1000) + " s.");
    if (toggle) {
      toggle.textContent = paused ? "Resume live refresh" : "Pause live refresh";
      toggle.setAttribute("aria-pressed", paused ? "true" : "false");
    }
  }

  function cancelTimer() {
    if (timer !== null) {
      window.clearTimeout(timer);
      timer = null;
    }
  }

  function schedule() {
    cancelTimer();
    if (!paused && !stopped && !document.hidden) {
      timer = window.setTimeout(refresh, interval);
    }
  }

  function openDetails() {
    var open = [];
    live.querySelectorAll("details[id][open]").forEach(function (element) {
      open.push(element.id);
    });
    return open;
  }

  function swap(html) {
    var open = openDetails();
    live.innerHTML = html;
    // The server stretches the interval when the page is slow to build (a very large job table).
    var summary = document.getElementById("bw-summary");
    var next = summary ? parseInt(summary.getAttribute("data-refresh-ms"), 10) : NaN;
    if (next > 0) {
      interval = next;
    }
    open.forEach(function (id) {
      var element = document.getElementById(id);
      if (element) {
        element.open = true;
      }
    });
  }

  function refresh(manual) {
    cancelTimer();
    if (pending && pending.abort) {
      pending.abort();
    }
    pending = window.AbortController ? new window.AbortController() : null;
    window
      .fetch(url, {
        credentials: "same-origin",
        cache: "no-store",
        headers: { "X-Requested-With": "XMLHttpRequest" },
        signal: pending ? pending.signal : undefined,
      })
      .then(function (response) {
        if (response.redirected || response.status === 403) {
          // Logged out, or the permission was taken away: stop rather than swap in a login page.
          stopped = true;
          say("Live refresh stopped: you are no longer allowed to view this page. Reload to sign in again.");
          if (toggle) {
            toggle.hidden = true;
          }
          return null;
        }
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.text();
      })
      .then(function (html) {
        if (html === null || stopped) {
          return;
        }
        if (manual === true || !paused) {
          swap(html);
        }
        describe();
        schedule();
      })
      .catch(function (error) {
        if (error && error.name === "AbortError") {
          return;
        }
        say("Refresh failed at " + clock() + " (" + error.message + "); retrying.");
        schedule();
      });
  }

  if (toggle) {
    toggle.hidden = false;
    toggle.addEventListener("click", function () {
      paused = !paused;
      try {
        window.sessionStorage.setItem(storageKey, paused ? "1" : "0");
      } catch (error) {
        /* storage unavailable: the choice lasts until the page is left */
      }
      describe();
      if (paused) {
        cancelTimer();
      } else {
        refresh();
      }
    });
  }

  if (reload) {
    reload.addEventListener("click", function (event) {
      event.preventDefault();
      if (!stopped) {
        refresh(true);
      }
    });
  }

  document.addEventListener("visibilitychange", function () {
    if (document.hidden) {
      cancelTimer();
    } else if (!paused && !stopped) {
      refresh();
    }
  });

  describe();
  schedule();
})();
