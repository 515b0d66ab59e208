// The operator's page (/__idemgate/ui): a client of the operator API under
// /__idemgate/, with the admin token the operator enters, kept in this
// tab's sessionStorage. It has no power of its own: every action is an API
// call with `Authorization: Bearer <token>`, and every answer is shown as
// the API gave it (a problem as its title and detail). It builds the page
// with DOM nodes and text only (never HTML from strings): keys, paths,
// headers and bodies come from senders.
//
// It is served as ES modules from this folder, each importing only those
// below it: dom.js (building blocks), api.js (the API client), page.js
// (what every view shares), views.js and receipt.js (the views),
// router.js (rendering by address, the token prompt), app.js (the start).

import { TOKEN_KEY } from "./api.js";
import { route } from "./page.js";
import { showTokenView } from "./router.js";

// ---- start -------------------------------------------------------------

if (sessionStorage.getItem(TOKEN_KEY)) route();
else showTokenView("");
