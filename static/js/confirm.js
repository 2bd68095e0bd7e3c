// A form with data-confirm asks before it submits (no inline on* handlers: the CSP forbids them).
document.addEventListener(
  "submit",
  function (event) {
    var message = event.target.getAttribute("data-confirm");
    if (message && !window.confirm(message)) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  },
  true,
);
