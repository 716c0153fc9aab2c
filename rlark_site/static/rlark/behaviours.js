// RLark's page behaviours, without inline script (the Content-Security-Policy allows none):
// - data-submit-on-change[="submitter-id"]: submit the field's form when it changes;
// - data-confirm="question" on a form: ask before submitting it;
// - data-copy-target="element-id" on a button: copy that element's text (or select it when the
//   clipboard is unavailable); the button's data-done / data-select texts go to #copy-status;
// - data-add-row="template-id" data-add-row-to="tbody-id" on a button: append a copy of the
//   template's row to the table body, "__ROW__" replaced by the row's place (0-based, as the
//   server numbers rows) and "__NUM__" by its number (1-based); the first field gets focus;
// - live findings: after htmx swapped findings containers (.field-findings; an error is a
//   .finding.error in it), every input described by a container follows it: aria-invalid (the
//   red border) is set or cleared. The server decides; this only mirrors its answer;
// - data-live-region on an element that htmx re-renders by itself (a poll): an answer that
//   would replace it while a pointer is pressed inside it is not swapped in (the next poll
//   brings the news). Pressing and releasing then happen on the same link or button, so the
//   click is never lost to a re-render between the two. Likewise while text is selected in it
//   (a user copying a pod name or log lines): the selection is kept until it is cleared.
//   (Its polled links also carry an id,
//   so htmx gives a keyboard user's focus back after a re-render, and swap with settle:0ms,
//   so they work from the moment they are in the page.)
// - the navigation (templates/base.html): each details[data-nav-group] is a disclosure that
//   works without this script; here its summary gets aria-expanded and aria-controls, opening
//   one closes the others, Escape closes the open one and gives the focus back to its button,
//   a click or the focus elsewhere closes it. Below 720 px, button[data-nav-menu] (Menu)
//   shows and hides the groups (aria-expanded; Escape closes it too).
// - data-keep-open on a <details id=...> that a poll re-renders (the job page's Normal events):
//   the re-rendered one is open or closed as the user left the one it replaces.
(function () {
  "use strict";

  document.addEventListener("change", function (event) {
    var field = event.target.closest ? event.target.closest("[data-submit-on-change]") : null;
    if (!field || !field.form) return;
    var submitter = field.dataset.submitOnChange;
    field.form.requestSubmit(submitter ? document.getElementById(submitter) : undefined);
  });

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form.dataset && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  }, true);

  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("[data-copy-target]") : null;
    if (!button) return;
    var source = document.getElementById(button.dataset.copyTarget);
    var status = document.getElementById("copy-status");
    var say = function (text) { if (status) status.textContent = text; };
    var select = function () {
      var range = document.createRange();
      range.selectNodeContents(source);
      var selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      say(button.dataset.select);
    };
    if (navigator.clipboard) {
      navigator.clipboard.writeText(source.textContent).then(function () {
        say(button.dataset.done);
      }, select);
    } else {
      select();
    }
  });

  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("[data-add-row]") : null;
    if (!button) return;
    var template = document.getElementById(button.dataset.addRow);
    var body = document.getElementById(button.dataset.addRowTo);
    if (!template || !body) return;
    var place = body.rows.length;
    body.insertAdjacentHTML("beforeend", template.innerHTML
      .split("__ROW__").join(String(place)).split("__NUM__").join(String(place + 1)));
    var first = body.rows[place] && body.rows[place].querySelector("input, select, textarea");
    if (first) first.focus();
  });

  function markFields() {
    document.querySelectorAll(".field-findings[id]").forEach(function (box) {
      var invalid = box.querySelector(".finding.error") !== null;
      document.querySelectorAll('[aria-describedby~="' + box.id + '"]').forEach(function (input) {
        if (!/^(INPUT|SELECT|TEXTAREA)$/.test(input.tagName)) return;
        if (invalid) {
          input.setAttribute("aria-invalid", "true");
        } else {
          input.removeAttribute("aria-invalid");
        }
      });
    });
  }
  ["htmx:afterSettle", "htmx:oobAfterSwap"].forEach(function (name) {
    document.addEventListener(name, markFields);
  });

  var pressed = null;  // the element a pointer was pressed on, until it is released
  document.addEventListener("pointerdown", function (event) { pressed = event.target; }, true);
  ["pointerup", "pointercancel"].forEach(function (name) {
    document.addEventListener(name, function () { pressed = null; }, true);
  });
  window.addEventListener("blur", function () { pressed = null; });
  function selectsIn(region) {
    var selection = window.getSelection ? window.getSelection() : null;
    if (!selection || selection.isCollapsed || !selection.rangeCount) return false;
    return region.contains(selection.anchorNode) || region.contains(selection.focusNode);
  }
  document.addEventListener("htmx:beforeSwap", function (event) {
    var region = event.detail.target;
    if (!region || !region.hasAttribute || !region.hasAttribute("data-live-region")) return;
    if ((pressed && region.contains(pressed)) || selectsIn(region)) {
      event.detail.shouldSwap = false;
    }
  });

  // id -> open, of details[data-keep-open] as they were just before their region was swapped:
  // read from the element itself (its toggle event comes a task later, after a swap that
  // could land in between)
  var keptOpen = {};
  document.addEventListener("htmx:beforeSwap", function (event) {
    var region = event.detail.target;
    if (!region || !region.querySelectorAll) return;
    region.querySelectorAll("details[data-keep-open][id]").forEach(function (details) {
      keptOpen[details.id] = details.open;
    });
  });
  document.addEventListener("htmx:load", function (event) {
    var root = event.detail.elt;
    if (!root || !root.querySelectorAll) return;
    var all = Array.prototype.slice.call(root.querySelectorAll("details[data-keep-open][id]"));
    if (root.matches("details[data-keep-open][id]")) all.push(root);
    all.forEach(function (details) {
      if (Object.prototype.hasOwnProperty.call(keptOpen, details.id)) {
        details.open = keptOpen[details.id];
      }
    });
  });

  function navGroups() {
    return Array.prototype.slice.call(document.querySelectorAll("details[data-nav-group]"));
  }
  function markExpanded(group) {
    var summary = group.querySelector("summary");
    var menu = summary && summary.nextElementSibling;
    if (!summary) return;
    if (menu && menu.id) summary.setAttribute("aria-controls", menu.id);
    summary.setAttribute("aria-expanded", group.open ? "true" : "false");
  }
  function closeGroup(group, focus) {
    group.open = false;
    markExpanded(group);
    if (focus) group.querySelector("summary").focus();
  }
  function menuButton() { return document.querySelector("button[data-nav-menu]"); }
  function setMenu(open, focus) {
    var button = menuButton();
    if (!button) return;
    var bar = document.getElementById(button.getAttribute("aria-controls"));
    button.setAttribute("aria-expanded", open ? "true" : "false");
    if (bar) bar.classList.toggle("open", open);
    if (focus) button.focus();
  }
  function wireNavigation() {
    navGroups().forEach(markExpanded);
    var button = menuButton();
    if (button) {
      button.addEventListener("click", function () {
        setMenu(button.getAttribute("aria-expanded") !== "true", false);
      });
    }
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", wireNavigation);
  } else {
    wireNavigation();
  }
  document.addEventListener("toggle", function (event) {
    var group = event.target;
    if (!group.matches || !group.matches("details[data-nav-group]")) return;
    markExpanded(group);
    if (group.open) {
      navGroups().forEach(function (other) { if (other !== group && other.open) closeGroup(other); });
    }
  }, true);
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape" && event.key !== "Esc") return;
    var group = event.target.closest ? event.target.closest("details[data-nav-group][open]") : null;
    if (!group && (event.target === document.body || event.target === document.documentElement)) {
      // nothing has the focus (it was lost, e.g. to a window switch): Escape still closes the
      // open group and gives its button the focus
      group = navGroups().filter(function (g) { return g.open; })[0] || null;
    }
    if (group) {
      event.preventDefault();
      closeGroup(group, true);
      return;
    }
    var button = menuButton();
    var bar = button && document.getElementById(button.getAttribute("aria-controls"));
    if (bar && bar.classList.contains("open") && (bar.contains(event.target) || event.target === button)) {
      event.preventDefault();
      setMenu(false, true);
    }
  });
  document.addEventListener("click", function (event) {
    navGroups().forEach(function (group) {
      if (group.open && !group.contains(event.target)) closeGroup(group);
    });
  });
  document.addEventListener("focusout", function (event) {
    // a pointer's press moves the focus first: the click decides (closing now would move
    // the groups below the stacked phone menu away from under the pointer before its release)
    if (pressed) return;
    var group = event.target.closest ? event.target.closest("details[data-nav-group][open]") : null;
    if (group && event.relatedTarget && !group.contains(event.relatedTarget)) closeGroup(group);
  });
})();
