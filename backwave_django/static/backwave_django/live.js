/* Live refresh for the console's pages (Dashboard, Jobs, Queues, Workers): every few seconds,
   fetch the page again and swap its live parts in place. No framework.

   The toolbar element [data-bw-live] says what to fetch and what to swap:
     data-bw-live-url      a fragment to fetch (the Dashboard's); without it the page's own URL
     data-bw-live-regions  the ids of the elements to replace with their counterparts from the
                           fetched page (or, with a fragment, the one element the fragment fills)
     data-refresh-ms       the interval; a fetched element carrying data-refresh-ms updates it
                           (the server stretches it when a page is slow to build)
   Progressive enhancement only: without this script each page is complete and has a Reload link.
   Refresh pauses while the tab is hidden, while rows are selected or a field in a live part has
   the focus (nothing the operator is doing is replaced), and with the Pause button, whose choice
   is kept for the browser tab. It stops, saying so, when the session ends. */
(function () {
  "use strict";

  var root = document.querySelector("[data-bw-live]");
  if (!root || !window.fetch || !window.DOMParser) {
    return;
  }
  var fragmentUrl = root.getAttribute("data-bw-live-url");
  var regions = (root.getAttribute("data-bw-live-regions") || "").split(/\s+/).filter(Boolean);
  var toggle = document.getElementById("bw-refresh-toggle");
  var status = document.getElementById("bw-refresh-status");
  var reload = document.getElementById("bw-reload");
  var interval = parseInt(root.getAttribute("data-refresh-ms"), 10) || 5000;
  var storageKey = "bw-live-paused:" + root.getAttribute("data-bw-live");
  var paused = false;
  var stopped = false;
  var held = false;
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

  function describe() {
    if (stopped) {
      return;
    }
    if (paused) {
      say("Live refresh paused.");
    } else if (held) {
      say("Live refresh waits while rows are selected or a field is in use.");
    } else {
      say("Live: refreshes every " + Math.round(interval / 1000) + " s.");
    }
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

  // Something the operator is doing that a swap would undo: selected rows, a field in use.
  function busy() {
    if (document.querySelector("input.action-select:checked, input.bw-select:checked, #action-toggle:checked")) {
      return true;
    }
    var active = document.activeElement;
    if (!active || !active.matches("input:not([type=checkbox]):not([type=radio]), select, textarea")) {
      return false;
    }
    return regions.some(function (id) {
      var region = document.getElementById(id);
      return region && region.contains(active);
    });
  }

  function openDetails(container) {
    var open = [];
    container.querySelectorAll("details[id][open]").forEach(function (element) {
      open.push(element.id);
    });
    return open;
  }

  function reopen(ids) {
    ids.forEach(function (id) {
      var element = document.getElementById(id);
      if (element) {
        element.open = true;
      }
    });
  }

  // Table bodies keep their element (Django's selection script listens on it) and, when the rows
  // are as many as before, their checkboxes too (the script keeps a list of them); otherwise the
  // script is pointed at the new checkboxes.
  function swapRows(current, fresh) {
    var oldBoxes = current.querySelectorAll("input.action-select");
    var newBoxes = fresh.querySelectorAll("input.action-select");
    var rebind = oldBoxes.length !== newBoxes.length;
    if (!rebind) {
      newBoxes.forEach(function (box, index) {
        var kept = oldBoxes[index];
        kept.value = box.value;
        kept.checked = false;
        if (box.hasAttribute("aria-label")) {
          kept.setAttribute("aria-label", box.getAttribute("aria-label"));
        }
        box.replaceWith(kept);
      });
    }
    current.replaceChildren.apply(current, Array.from(fresh.childNodes));
    if (rebind && window.Actions && newBoxes.length) {
      window.Actions(document.querySelectorAll("tr input.action-select"));
    }
  }

  function swapRegion(current, fresh) {
    var currentBody = current.querySelector("tbody");
    var freshBody = fresh.querySelector("tbody");
    if (currentBody && freshBody && current.querySelectorAll("tbody").length === 1) {
      // Everything but the body (headers, captions) is replaced as a whole; the body row by row.
      var freshHead = fresh.querySelector("thead");
      var currentHead = current.querySelector("thead");
      if (freshHead && currentHead && freshHead.innerHTML !== currentHead.innerHTML) {
        currentHead.replaceWith(document.importNode(freshHead, true));
      }
      swapRows(currentBody, document.importNode(freshBody, true));
      return;
    }
    current.replaceWith(document.importNode(fresh, true));
  }

  // The action bar is not swapped (the operator may be choosing an action), but what it says about
  // the rows is: how many there are, which Django's counter ("0 of 50 selected") reads.
  function syncActions(fresh) {
    [".action-counter", "div.actions span.all", "div.actions span.question a"].forEach(function (selector) {
      var current = document.querySelector(selector);
      var replacement = fresh.querySelector(selector);
      if (current && replacement) {
        current.textContent = replacement.textContent;
        if (replacement.dataset.actionsIcnt) {
          current.dataset.actionsIcnt = replacement.dataset.actionsIcnt;
        }
      }
    });
  }

  function swapPage(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html");
    var open = openDetails(document);
    regions.forEach(function (id) {
      var current = document.getElementById(id);
      var replacement = fresh.getElementById(id);
      if (current && replacement && current.innerHTML !== replacement.innerHTML) {
        swapRegion(current, replacement);
      }
    });
    reopen(open);
    syncActions(fresh);
    var freshRoot = fresh.querySelector("[data-bw-live]");
    return freshRoot ? parseInt(freshRoot.getAttribute("data-refresh-ms"), 10) : NaN;
  }

  function swapFragment(html) {
    var container = document.getElementById(regions[0]);
    if (!container) {
      return NaN;
    }
    var open = openDetails(container);
    container.innerHTML = html;
    reopen(open);
    var marked = container.querySelector("[data-refresh-ms]");
    return marked ? parseInt(marked.getAttribute("data-refresh-ms"), 10) : NaN;
  }

  function refresh(manual) {
    cancelTimer();
    if (manual === true && !fragmentUrl && busy()) {
      window.location.reload(); // asked for: start afresh, selection and all
      return;
    }
    held = manual !== true && busy();
    if (held) {
      describe();
      schedule();
      return;
    }
    if (pending && pending.abort) {
      pending.abort();
    }
    pending = window.AbortController ? new window.AbortController() : null;
    window
      .fetch(fragmentUrl || window.location.href, {
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
        if (manual === true || (!paused && !busy())) {
          var next = fragmentUrl ? swapFragment(html) : swapPage(html);
          if (next > 0) {
            interval = next;
          }
        }
        describe();
        schedule();
      })
      .catch(function (error) {
        if (error && error.name === "AbortError") {
          return;
        }
        say("Refresh failed at " + new Date().toLocaleTimeString() + " (" + error.message + "); retrying.");
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
