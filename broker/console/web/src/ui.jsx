// Small pieces the pages share. Every figure shown formatted also keeps
// its raw number in data-value, which the browser tests read.

export function Stat({ testid, label, value, format, small }) {
  return (
    <div class={small ? 'stat small' : 'stat'}>
      <div class="stat-label">{label}</div>
      <div class="stat-value" data-testid={testid} data-value={value ?? ''}>
        {value === undefined ? '—' : format(value)}
      </div>
    </div>
  );
}

// Num is a table cell holding a number.
export function Num({ testid, value, format, ...rest }) {
  return (
    <td class="num" data-testid={testid} data-value={value ?? 0} {...rest}>
      {format(value ?? 0)}
    </td>
  );
}

export function Card({ title, testid, extra, children }) {
  return (
    <section class="card" data-testid={testid}>
      {title && (
        <header class="card-head">
          <h2>{title}</h2>
          {extra}
        </header>
      )}
      {children}
    </section>
  );
}

// EmptyRow is the one row of a table with nothing to list.
export function EmptyRow({ cols, children }) {
  return (
    <tr class="empty">
      <td colSpan={cols}>{children}</td>
    </tr>
  );
}

export function Loading({ data }) {
  return data === undefined ? <p class="muted">Loading…</p> : null;
}

export function PageTitle({ crumbs = [], children, testid }) {
  return (
    <header class="page-head">
      {crumbs.length > 0 && (
        <nav class="crumbs">
          {crumbs.map(([label, href]) => (
            <span key={href}>
              <a href={href}>{label}</a> /{' '}
            </span>
          ))}
        </nav>
      )}
      <h1 data-testid={testid}>{children}</h1>
    </header>
  );
}

export function Yes({ value, yes = 'yes', no = 'no' }) {
  return <span class={value ? 'ok' : 'bad'}>{value ? yes : no}</span>;
}
