// Light/dark: follows the system unless the user picked one (kept in localStorage).
(function () {
  var saved = localStorage.getItem("ke-theme");
  if (saved) document.documentElement.setAttribute("data-theme", saved);
  document.addEventListener("click", function (event) {
    if (!event.target.closest("[data-theme-toggle]")) return;
    var root = document.documentElement;
    var dark = root.getAttribute("data-theme") === "dark" ||
      (root.getAttribute("data-theme") === "auto" && matchMedia("(prefers-color-scheme: dark)").matches);
    var next = dark ? "light" : "dark";
    root.setAttribute("data-theme", next);
    localStorage.setItem("ke-theme", next);
  });
})();
