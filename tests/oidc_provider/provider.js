// A real OpenID provider (panva's oidc-provider, pinned in package-lock.json) on loopback for the browser tests
// (tests/browser/shell/test_oidc_sign_in.py). Its own development login form accepts any password: who signs in, and
// with which groups, is whatever ACCOUNTS_FILE (a JSON object: login -> {email, groups}) says at that moment, so
// a test changes someone's groups between two sign-ins by rewriting the file.
//
//   PORT=… CLIENT_ID=… CLIENT_SECRET=… REDIRECT_URI=… POST_LOGOUT_REDIRECT_URI=… ACCOUNTS_FILE=… node provider.js
import { readFileSync } from 'node:fs';

import Provider from 'oidc-provider';

const env = (name) => {
  if (!process.env[name]) throw new Error(`${name} is not set`);
  return process.env[name];
};
const port = Number(env('PORT'));
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: env('CLIENT_ID'),
    client_secret: env('CLIENT_SECRET'),
    redirect_uris: [env('REDIRECT_URI')],
    post_logout_redirect_uris: [env('POST_LOGOUT_REDIRECT_URI')],
    grant_types: ['authorization_code'],
    response_types: ['code'],
  }],
  // Every authorization request must carry a PKCE S256 challenge: the dashboard sends one.
  pkce: { required: () => true },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['preferred_username', 'name'],
    groups: ['groups'],
  },
  // The scopes' claims in the ID token itself, as Okta and Entra ID send groups there once configured.
  conformIdTokenClaims: false,
  async findAccount(ctx, id) {
    const account = JSON.parse(readFileSync(env('ACCOUNTS_FILE'), 'utf8'))[id];
    if (!account) return undefined;
    return {
      accountId: id,
      async claims() {
        return {
          sub: id,
          preferred_username: id,
          name: id,
          email: account.email ?? '',
          email_verified: true,
          groups: account.groups ?? [],
        };
      },
    };
  },
  cookies: { keys: ['tests-only-not-secret'] },
});
provider.proxy = false;
provider.listen(port, '127.0.0.1', () => console.log(`oidc-provider listening on ${issuer}`));
