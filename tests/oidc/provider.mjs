// A loopback OpenID provider for the sign-in end-to-end tests (node-oidc-provider, dev interactions).
//
//   node provider.mjs PORT WEB_REDIRECT_URI
//
// Clients: `commons-web` (confidential, authorization code + PKCE, redirects to WEB_REDIRECT_URI) and
// `commons-cli` (public native client: loopback redirect with any port, device flow). Any login name
// signs in (any password); the accounts below carry the claims the tests expect, others get none.
import Provider from 'oidc-provider';

const port = Number(process.argv[2]);
const webRedirect = process.argv[3];
const issuer = `http://127.0.0.1:${port}`;

const ACCOUNTS = {
  alice: { email: 'alice@corp.local', name: 'Alice Adams', groups: ['ml-nlp'] },
  lena: { email: 'lena@corp.local', name: 'Lena Lead', groups: ['ml-nlp', 'ml-nlp-leads'] },
  victor: { email: 'victor@corp.local', name: 'Victor Vision', groups: ['ml-vision'] },
};

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'commons-web',
      client_secret: 'commons-web-secret',
      redirect_uris: [webRedirect],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    },
    {
      client_id: 'commons-cli',
      application_type: 'native',
      token_endpoint_auth_method: 'none',
      redirect_uris: ['http://127.0.0.1/callback'],
      grant_types: ['authorization_code', 'refresh_token', 'urn:ietf:params:oauth:grant-type:device_code'],
      response_types: ['code'],
    },
  ],
  scopes: ['openid', 'email', 'profile', 'groups', 'offline_access'],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username'],
    groups: ['groups'],
  },
  conformIdTokenClaims: false,
  features: {
    devInteractions: { enabled: true },
    deviceFlow: { enabled: true },
    revocation: { enabled: true },
  },
  cookies: { keys: ['gpucommons-test-only'] },
  async findAccount(_ctx, id) {
    const known = ACCOUNTS[id] || { email: `${id}@corp.local`, name: id, groups: [] };
    return {
      accountId: id,
      async claims() {
        return { sub: id, preferred_username: id, email_verified: true, ...known };
      },
    };
  },
});

provider.listen(port, '127.0.0.1', () => {
  console.log(`ready ${issuer}`);
});
