// Types the dashboard JSON is checked against (tests/test_dashboard_schema.py generates
// dashboard.gen.ts from dashboards/grafana/bias-monitor.json and runs `tsc --noEmit`).
// Every type comes from @grafana/schema, pinned in package.json to the Grafana release
// deploy/docker-compose.yml runs; only the Prometheus query is written out here, because
// @grafana/schema 11.1.0 ships no type for it.
import type * as schema from '@grafana/schema';
import type * as stat from '@grafana/schema/dist/esm/raw/composable/stat/panelcfg/x/StatPanelCfg_types.gen';
import type * as statetimeline from '@grafana/schema/dist/esm/raw/composable/statetimeline/panelcfg/x/StateTimelinePanelCfg_types.gen';
import type * as table from '@grafana/schema/dist/esm/raw/composable/table/panelcfg/x/TablePanelCfg_types.gen';
import type * as timeseries from '@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen';

// JSON holds an enum's value ("value"), never the TypeScript enum member, which a string
// literal is not assignable to: turn string enums into the union of their values
// (`${E}`), everywhere in a type. Numeric enums accept their literal values as they are.
export type Json<T> = T extends string
  ? `${T}`
  : T extends number | boolean | null | undefined
    ? T
    : T extends ReadonlyArray<infer U>
      ? Array<Json<U>>
      : T extends object
        ? { [K in keyof T]: Json<T[K]> }
        : T;

// Grafana deep-merges a panel's options and field config with the plugin's defaults when
// it loads the panel, so a missing key is never an error there; a wrong key, type or
// enum value is.
export type Loose<T> = T extends string
  ? `${T}`
  : T extends number | boolean | null | undefined
    ? T
    : T extends ReadonlyArray<infer U>
      ? Array<Loose<U>>
      : T extends object
        ? { [K in keyof T]?: Loose<T[K]> }
        : T;

// PrometheusDataQuery of Grafana 11.1 (public/app/plugins/datasource/prometheus/dataquery.cue).
export interface PrometheusQuery extends schema.DataQuery {
  datasource?: schema.DataSourceRef;
  editorMode?: 'code' | 'builder';
  exemplar?: boolean;
  expr: string;
  format?: 'time_series' | 'table' | 'heatmap';
  instant?: boolean;
  interval?: string;
  intervalFactor?: number;
  legendFormat?: string;
  range?: boolean;
}

type Common = Omit<schema.FieldConfig, 'custom'>;

// An override property: `custom.<key>` of the plugin's field config, or a key of the
// common field config, each with its own value type.
type OverrideProperty<Custom> =
  | { [K in keyof Custom & string]-?: { id: `custom.${K}`; value?: Loose<Custom[K]> } }[keyof Custom & string]
  | { [K in keyof Common & string]-?: { id: K; value?: Json<Common[K]> } }[keyof Common & string];

export interface FieldConfigOf<Custom> {
  defaults: Json<Common> & { custom?: Loose<Custom> };
  overrides: Array<{ matcher: Json<schema.MatcherConfig>; properties: Array<OverrideProperty<Custom>> }>;
}

export type PanelOf<Type extends string, Options, Custom> = Omit<
  Json<schema.Panel>,
  'type' | 'options' | 'fieldConfig' | 'targets'
> & {
  type: Type;
  options: Loose<Options>;
  fieldConfig: FieldConfigOf<Custom>;
  targets: PrometheusQuery[];
};

// One entry per panel plugin the dashboard uses; the generator refuses any other type.
export type TimeseriesPanel = PanelOf<'timeseries', timeseries.Options, timeseries.FieldConfig>;
// The stat panel has no field config of its own (no `custom` keys).
export type StatPanel = PanelOf<'stat', stat.Options, Record<string, never>>;
export type TablePanel = PanelOf<'table', table.Options, table.FieldConfig>;
export type StateTimelinePanel = PanelOf<'state-timeline', statetimeline.Options, statetimeline.FieldConfig>;
export type RowPanel = Json<schema.RowPanel>;
// Grafana 11.1 itself writes keys on variables that the schema's VariableModel does not
// list (its QueryVariableModel's definition, its IntervalVariableModel's auto step);
// they are allowed by name, so a misspelt key still fails.
export type Variable = Json<schema.VariableModel> & {
  definition?: string;
  auto?: boolean;
  auto_count?: number;
  auto_min?: string;
};
export type Dashboard = Omit<Json<schema.Dashboard>, 'templating'> & {
  templating?: { list?: Variable[] };
};
