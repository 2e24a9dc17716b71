"""identity: who is calling and what they may do. Pure (no I/O); the server wires it to HTTP and SQL.

- `principal`: `Principal` (a caller and its roles) and `Role`;
- `authz`: `authorize(principal, action, team)` and `visible_teams(principal, policy, action)`, the one
  role table every route uses;
- `roles`: directory groups → roles under a policy; token scopes that narrow them;
- `tokens`: API token generation, parsing, hashing, constant-time verification;
- `scim`, `scim_filter`: SCIM resources as we keep them, the tolerance policy for real IdPs' payloads,
  the `eq`/`and` filters we answer;
- `oidc`: an ID token's claims as a sign-in identity, and the rule for its groups claim.
"""
