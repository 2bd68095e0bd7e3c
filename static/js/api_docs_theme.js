// The API docs page (Swagger UI) in the portal's theme. Swagger UI's own dark theme is the
// `dark-mode` class on <html>; this keeps that class in step with the portal's choice
// (theme.js: data-theme, saved in localStorage, "auto" following the system), on load and
// whenever the toggle or the system changes it. Loaded in <head>, so the page never flashes.
(function () {
  var root = document.documentElement;
  var system = matchMedia("(prefers-color-scheme: dark)");
  function apply() {
    var theme = root.getAttribute("data-theme");
    root.classList.toggle("dark-mode", theme === "dark" || (theme !== "light" && system.matches));
  }
  apply();
  new MutationObserver(apply).observe(root, { attributes: true, attributeFilter: ["data-theme"] });
  system.addEventListener("change", apply);
})();
