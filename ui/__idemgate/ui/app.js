// The operator's page (/__idemgate/ui): a client of the operator API under
// /__idemgate/, with the admin token the operator enters, kept in this
// tab's sessionStorage. It has no power of its own: every action is an API
// call with `Authorization: Bearer <token>`, and every answer is shown as
// the API gave it (a problem as its title and detail). It builds the page
// with DOM nodes and text only (never HTML from strings): keys, paths,
// headers and bodies come from senders.
//
// It is served as ES modules from this folder: app.js starts it, shell.js
// holds what every view shares, views.js and receipt.js the views,
// api.js the API client, dom.js the building blocks.

import { TOKEN_KEY } from "./api.js";
import { route, showTokenView } from "./shell.js";
// ---- start -------------------------------------------------------------

if (sessionStorage.getItem(TOKEN_KEY)) route();
else showTokenView("");
