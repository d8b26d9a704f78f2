-- Agents and people share one namespace of usernames: a sender name never means two parties.
-- Each name is claimed here once, by its kind of owner, in the same statement that writes the
-- agent or person; the foreign keys make a name in both tables impossible, whoever the writer.
-- A claim outlives its owner, so a name is never handed to a second party.
create table usernames (
  username text primary key,
  owner text not null check (owner in ('agent', 'person')),
  unique (username, owner)
);

-- Two writers that checked and then inserted could both take a name; such a pair must be
-- resolved by hand (one of each renamed) before the claims can be backfilled.
do $migration$
declare
  doubled text;
begin
  select string_agg(a.username, ', ' order by a.username) into doubled
  from agents a join people p on p.username = a.username;
  if doubled is not null then
    raise exception 'These usernames belong to both an agent and a person: %. Rename one of each pair, then migrate again.', doubled;
  end if;
end
$migration$;

insert into usernames (username, owner)
select username, 'agent' from agents
union all
select username, 'person' from people;

alter table agents
  add column username_owner text not null generated always as ('agent') stored,
  add foreign key (username, username_owner) references usernames (username, owner);
alter table people
  add column username_owner text not null generated always as ('person') stored,
  add foreign key (username, username_owner) references usernames (username, owner);
