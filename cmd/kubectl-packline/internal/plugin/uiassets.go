package plugin

import "embed"

// uiAssets are the catalogue page: index.html (an html/template), app.js
// and style.css. Plain JavaScript, no build step.
//
//go:embed ui
var uiAssets embed.FS
