// Tenants, and one tenant's namespaces.
import { getJSON } from '../api.js';
import { usePoll } from '../poll.js';
import { followRowLink, links } from '../router.js';
import { Card, EmptyRow, Loading, PageTitle } from '../ui.jsx';

const enc = encodeURIComponent;

export function Tenants() {
  const { data } = usePoll(() => getJSON('admin/v2/tenants'), []);
  return (
    <>
      <PageTitle>Tenants</PageTitle>
      <Card>
        <Loading data={data} />
        {data && (
          <table class="links">
            <tbody>
              {data.length === 0 && <EmptyRow cols={1}>No tenants.</EmptyRow>}
              {[...data].sort().map((t) => (
                <tr key={t} data-testid="tenant-row" data-tenant={t} onClick={followRowLink(links.tenant(t))}>
                  <td>
                    <a href={links.tenant(t)}>{t}</a>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Card>
    </>
  );
}

export function Tenant({ tenant }) {
  const { data } = usePoll(async () => {
    const [info, namespaces] = await Promise.all([
      getJSON(`admin/v2/tenants/${enc(tenant)}`),
      getJSON(`admin/v2/namespaces/${enc(tenant)}`),
    ]);
    return { info, namespaces };
  }, [tenant]);
  return (
    <>
      <PageTitle crumbs={[['Tenants', '#/tenants']]}>{tenant}</PageTitle>
      <Loading data={data} />
      {data && (
        <div class="facts">
          <span>Admin roles: {(data.info.adminRoles ?? []).join(', ') || '—'}</span>
          <span>Allowed clusters: {(data.info.allowedClusters ?? []).join(', ') || '—'}</span>
        </div>
      )}
      {data && (
        <Card title="Namespaces">
          <table class="links">
            <tbody>
              {data.namespaces.length === 0 && <EmptyRow cols={1}>No namespaces.</EmptyRow>}
              {[...data.namespaces].sort().map((ns) => (
                <tr key={ns} data-testid="namespace-row" data-namespace={ns} onClick={followRowLink(links.namespace(ns))}>
                  <td>
                    <a href={links.namespace(ns)}>{ns}</a>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </Card>
      )}
    </>
  );
}
