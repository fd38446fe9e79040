/*
 * ARX's optimal full-domain transformation under one risk-based privacy model, for the comparison
 * with duckanon's lattice in run.py (beside this file; it compiles and runs this program).
 *
 * One invocation = one case. Arguments are key=value:
 *   data=PATH (';'-separated CSV)  hier=PATTERN (with {col})  qis=a,b,c (reported in this order)
 *   model=kmap|dpresence|avgrisk|uniq|blike|ddisc
 *   k=5 (kmap)  dmin=0 dmax=0.5 (dpresence)  risk=0.05 (avgrisk, uniq)  estimator=zayatz|dankar
 *   (uniq)  population=N (uniq: ARXPopulationModel.create(N))  sensitive=COL beta=1.0 (blike)
 *   delta=1.0 (ddisc)
 *   subset=10: the research subset is the rows whose 0-based row number is divisible by 10
 *     (kmap and dpresence need it: the whole file is the population, the subset the sample)
 *   supp=0.05  warmup=2 repeat=5  out=PATH.csv (the published rows of the optimum; the subset's
 *     rows for a subset case)  cross=l1,l2,...;l1,l2,... (transformations, levels in `qis` order,
 *     that ARX evaluates after the search: its anonymity verdict and Loss for each)
 * Quality model: Metric.createLossMetric() (gs-factor 0.5, geometric mean), ARX's default
 * optimal search (Flash). Prints one line "RESULT {json}".
 */
import java.io.BufferedWriter;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeSet;

import org.deidentifier.arx.ARXAnonymizer;
import org.deidentifier.arx.ARXConfiguration;
import org.deidentifier.arx.ARXLattice;
import org.deidentifier.arx.ARXLattice.ARXNode;
import org.deidentifier.arx.ARXPopulationModel;
import org.deidentifier.arx.ARXResult;
import org.deidentifier.arx.AttributeType;
import org.deidentifier.arx.AttributeType.Hierarchy;
import org.deidentifier.arx.Data;
import org.deidentifier.arx.DataHandle;
import org.deidentifier.arx.DataSubset;
import org.deidentifier.arx.criteria.AverageReidentificationRisk;
import org.deidentifier.arx.criteria.BasicBLikeness;
import org.deidentifier.arx.criteria.DDisclosurePrivacy;
import org.deidentifier.arx.criteria.DPresence;
import org.deidentifier.arx.criteria.KMap;
import org.deidentifier.arx.criteria.PopulationUniqueness;
import org.deidentifier.arx.metric.Metric;
import org.deidentifier.arx.risk.RiskModelPopulationUniqueness.PopulationUniquenessModel;

public class ArxRisk {

    static final Map<String, String> OPTS = new HashMap<>();

    static String opt(String key, String dflt) {
        String v = OPTS.get(key);
        if (v == null && dflt == null) throw new IllegalArgumentException("missing argument " + key);
        return v == null ? dflt : v;
    }

    public static void main(String[] args) throws Exception {
        Locale.setDefault(Locale.ROOT);
        for (String a : args) {
            int i = a.indexOf('=');
            if (i < 0) throw new IllegalArgumentException("argument without '=': " + a);
            OPTS.put(a.substring(0, i), a.substring(i + 1));
        }
        List<String> qis = Arrays.asList(opt("qis", null).split(","));
        String model = opt("model", null);
        String sensitive = opt("sensitive", "");
        int every = Integer.parseInt(opt("subset", "0"));
        double supp = Double.parseDouble(opt("supp", "0"));
        int warmup = Integer.parseInt(opt("warmup", "2"));
        int repeat = Integer.parseInt(opt("repeat", "5"));

        Data data = Data.create(opt("data", null), StandardCharsets.UTF_8, ';');
        DataHandle input = data.getHandle();
        for (int c = 0; c < input.getNumColumns(); c++) {
            String name = input.getAttributeName(c);
            if (qis.contains(name)) {
                data.getDefinition().setAttributeType(name, AttributeType.QUASI_IDENTIFYING_ATTRIBUTE);
                data.getDefinition().setHierarchy(name, Hierarchy.create(opt("hier", null).replace("{col}", name),
                                                                         StandardCharsets.UTF_8, ';'));
            } else if (name.equals(sensitive)) {
                data.getDefinition().setAttributeType(name, AttributeType.SENSITIVE_ATTRIBUTE);
            } else {
                data.getDefinition().setAttributeType(name, AttributeType.INSENSITIVE_ATTRIBUTE);
            }
        }
        int rows = input.getNumRows();
        DataSubset subset = null;
        if (every > 0) {
            TreeSet<Integer> lines = new TreeSet<>();
            for (int r = 0; r < rows; r += every) lines.add(r);
            subset = DataSubset.create(data, lines);
        }

        ARXAnonymizer anonymizer = new ARXAnonymizer();
        List<Double> runs = new ArrayList<>();
        ARXResult result = null;
        for (int r = 0; r < warmup + repeat; r++) {
            data.getHandle().release();
            ARXConfiguration config = config(model, subset, supp);
            long s = System.nanoTime();
            result = anonymizer.anonymize(data, config);
            double ms = (System.nanoTime() - s) / 1e6;
            if (r >= warmup) runs.add(ms);
        }
        List<Double> sorted = new ArrayList<>(runs);
        sorted.sort(null);

        StringBuilder j = new StringBuilder("{");
        kv(j, "model", model);
        kv(j, "rows", rows);
        kv(j, "subset_rows", subset == null ? rows : subset.getArray().length);
        kv(j, "supp", supp);
        kv(j, "median_ms", sorted.get(sorted.size() / 2));
        j.append("\"runs_ms\":").append(runs).append(',');
        ARXNode optimum = result.getGlobalOptimum();
        kv(j, "solution", optimum != null);
        if (optimum != null) {
            j.append("\"transformation\":").append(Arrays.toString(levelsOf(optimum, qis))).append(',');
            kv(j, "score", optimum.getHighestScore().toString());
            kv(j, "lowest_score", optimum.getLowestScore().toString());
            long checked = 0, size = 0;
            for (ARXNode[] level : result.getLattice().getLevels()) {
                for (ARXNode n : level) { size++; if (n.isChecked()) checked++; }
            }
            kv(j, "checked", checked);
            kv(j, "lattice_materialized", size);
            DataHandle out = result.getOutput(false);
            DataHandle published = subset == null ? out : out.getView();
            int outliers = 0;
            for (int r = 0; r < published.getNumRows(); r++) if (published.isOutlier(r)) outliers++;
            kv(j, "published_rows", published.getNumRows());
            kv(j, "suppressed", outliers);
            if (OPTS.containsKey("out")) write(published, opt("out", null));
        }
        // ARX's own verdict and Loss at other transformations (e.g. duckanon's optimum)
        if (OPTS.containsKey("cross") && !opt("cross", "").isEmpty()) {
            String[] order = result.getLattice().getBottom().getQuasiIdentifyingAttributes();
            StringBuilder c = new StringBuilder("[");
            for (String spec : opt("cross", null).split(";")) {
                String[] f = spec.split(",");
                int[] internal = new int[order.length];
                for (int i = 0; i < order.length; i++) internal[i] = Integer.parseInt(f[qis.indexOf(order[i])].trim());
                ARXNode node = result.getLattice().getNode(internal);
                if (c.length() > 1) c.append(',');
                c.append('{');
                kv(c, "transformation", "[" + spec + "]");
                if (node == null) {
                    kv(c, "found", false);
                } else {
                    DataHandle out = result.getOutput(node, false);
                    DataHandle published = subset == null ? out : out.getView();
                    int outliers = 0;
                    for (int r = 0; r < published.getNumRows(); r++) if (published.isOutlier(r)) outliers++;
                    kv(c, "anonymity", String.valueOf(node.getAnonymity()));
                    kv(c, "score", node.getHighestScore().toString());
                    kv(c, "suppressed", outliers);
                }
                if (c.charAt(c.length() - 1) == ',') c.setLength(c.length() - 1);
                c.append('}');
            }
            j.append("\"cross\":").append(c).append("],");
        }
        if (j.charAt(j.length() - 1) == ',') j.setLength(j.length() - 1);
        System.out.println("RESULT " + j + "}");
    }

    static ARXConfiguration config(String model, DataSubset subset, double supp) {
        ARXConfiguration config = ARXConfiguration.create();
        switch (model) {
            case "kmap":
                config.addPrivacyModel(new KMap(Integer.parseInt(opt("k", null)), need(subset)));
                break;
            case "dpresence":
                config.addPrivacyModel(new DPresence(Double.parseDouble(opt("dmin", null)),
                                                     Double.parseDouble(opt("dmax", null)), need(subset)));
                break;
            case "avgrisk":
                config.addPrivacyModel(new AverageReidentificationRisk(Double.parseDouble(opt("risk", null))));
                break;
            case "uniq":
                PopulationUniquenessModel estimator = PopulationUniquenessModel.valueOf(opt("estimator", null).toUpperCase());
                config.addPrivacyModel(new PopulationUniqueness(Double.parseDouble(opt("risk", null)), estimator,
                                                                ARXPopulationModel.create(Long.parseLong(opt("population", null)))));
                break;
            case "blike":
                config.addPrivacyModel(new BasicBLikeness(opt("sensitive", null), Double.parseDouble(opt("beta", null))));
                break;
            case "ddisc":
                config.addPrivacyModel(new DDisclosurePrivacy(opt("sensitive", null), Double.parseDouble(opt("delta", null))));
                break;
            default:
                throw new IllegalArgumentException("unknown model " + model);
        }
        config.setSuppressionLimit(supp);
        config.setQualityModel(Metric.createLossMetric());
        return config;
    }

    static DataSubset need(DataSubset subset) {
        if (subset == null) throw new IllegalArgumentException("this model needs subset=N");
        return subset;
    }

    /** The node's levels in `qis` order. */
    static int[] levelsOf(ARXNode node, List<String> qis) {
        int[] levels = new int[qis.size()];
        for (int i = 0; i < qis.size(); i++) levels[i] = node.getGeneralization(qis.get(i));
        return levels;
    }

    static void write(DataHandle out, String path) throws IOException {
        File f = new File(path);
        if (f.getParentFile() != null) f.getParentFile().mkdirs();
        try (BufferedWriter w = Files.newBufferedWriter(f.toPath(), StandardCharsets.UTF_8)) {
            Iterator<String[]> it = out.iterator();
            while (it.hasNext()) {
                w.write(String.join(";", it.next()));
                w.write('\n');
            }
        }
    }

    static String num(double d) {
        if (Double.isNaN(d) || Double.isInfinite(d)) return "null";
        return Double.toString(d);
    }

    static void kv(StringBuilder j, String key, Object value) {
        j.append('"').append(key).append("\":");
        if (value instanceof Double) j.append(num((Double) value));
        else if (value instanceof Number || value instanceof Boolean) j.append(value);
        else j.append('"').append(String.valueOf(value).replace("\\", "\\\\").replace("\"", "\\\"")).append('"');
        j.append(',');
    }
}
