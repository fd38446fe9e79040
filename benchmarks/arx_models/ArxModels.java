/*
 * ARX's optimum under the models and metrics of issue 37, section 2, as ARX's JUnit suites configure
 * them (AbstractAnonymizationTest: every hierarchy file of the data set a QI, the sensitive column
 * from the case), for tests/e2e/test_arx_other_models.py's expected values and for checking
 * duckanon's nodes in ARX itself. One invocation = one case; arguments are key=value:
 *   data=PATH (';'-separated CSV)  hier=PATTERN (with {col})  qis=a,b,c (levels reported in this order)
 *   sensitive=COL  l=5  estimator=shannon|grassberger (EntropyLDiversity)  k=5 (KAnonymity)
 *   uniq=0.01 (SampleUniqueness)  supp=0.04  practical=true|false (setPracticalMonotonicity)
 *   metric=entropy|entropy_monotonic|dm|dm_star|loss  gs=0.5 (loss: createLossMetric(gs);
 *   entropy: createPrecomputedEntropyMetric(0.1, monotonic) as the suites do)
 *   node=l1,l2,... (levels in `qis` order): the lattice restricted to that one node
 *   (setMinimumGeneralization = setMaximumGeneralization), so ARX itself checks it and scores it
 * Prints one line "RESULT {json}": transformation (qis order), score, suppressed rows, or none.
 */
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.deidentifier.arx.ARXAnonymizer;
import org.deidentifier.arx.ARXConfiguration;
import org.deidentifier.arx.ARXLattice.ARXNode;
import org.deidentifier.arx.ARXResult;
import org.deidentifier.arx.AttributeType;
import org.deidentifier.arx.AttributeType.Hierarchy;
import org.deidentifier.arx.Data;
import org.deidentifier.arx.DataHandle;
import org.deidentifier.arx.criteria.EntropyLDiversity;
import org.deidentifier.arx.criteria.EntropyLDiversity.EntropyEstimator;
import org.deidentifier.arx.criteria.KAnonymity;
import org.deidentifier.arx.criteria.SampleUniqueness;
import org.deidentifier.arx.metric.Metric;

public class ArxModels {

    static final Map<String, String> OPTS = new HashMap<>();

    static String opt(String key, String dflt) {
        String v = OPTS.get(key);
        if (v == null && dflt == null) throw new IllegalArgumentException("missing argument " + key);
        return v == null ? dflt : v;
    }

    public static void main(String[] args) throws Exception {
        for (String a : args) {
            int eq = a.indexOf('=');
            OPTS.put(a.substring(0, eq), a.substring(eq + 1));
        }
        List<String> qis = Arrays.asList(opt("qis", null).split(","));
        String sensitive = opt("sensitive", "");
        Data data = Data.create(opt("data", null), StandardCharsets.UTF_8, ';');
        for (String q : qis) {
            data.getDefinition().setAttributeType(q, Hierarchy.create(opt("hier", null).replace("{col}", q),
                                                                      StandardCharsets.UTF_8, ';'));
        }
        if (!sensitive.isEmpty()) data.getDefinition().setAttributeType(sensitive, AttributeType.SENSITIVE_ATTRIBUTE);
        if (OPTS.containsKey("node")) {
            String[] levels = opt("node", null).split(",");
            for (int i = 0; i < qis.size(); i++) {
                int level = Integer.parseInt(levels[i].trim());
                data.getDefinition().setMinimumGeneralization(qis.get(i), level);
                data.getDefinition().setMaximumGeneralization(qis.get(i), level);
            }
        }
        ARXConfiguration config = ARXConfiguration.create(Double.parseDouble(opt("supp", "0")), metric());
        if (OPTS.containsKey("l")) {
            EntropyEstimator estimator = EntropyEstimator.valueOf(opt("estimator", "shannon").toUpperCase());
            config.addPrivacyModel(new EntropyLDiversity(sensitive, Double.parseDouble(opt("l", null)), estimator));
        }
        if (OPTS.containsKey("k")) config.addPrivacyModel(new KAnonymity(Integer.parseInt(opt("k", null))));
        if (OPTS.containsKey("uniq")) config.addPrivacyModel(new SampleUniqueness(Double.parseDouble(opt("uniq", null))));
        config.setPracticalMonotonicity(Boolean.parseBoolean(opt("practical", "false")));
        ARXResult result = new ARXAnonymizer().anonymize(data, config);
        StringBuilder j = new StringBuilder("{");
        ARXNode best = result.getGlobalOptimum();
        if (best == null) {
            j.append("\"transformation\":null");
        } else {
            String[] order = best.getQuasiIdentifyingAttributes();
            int[] internal = best.getTransformation();
            List<Integer> levels = new ArrayList<>();
            for (String q : qis) levels.add(internal[Arrays.asList(order).indexOf(q)]);
            DataHandle out = result.getOutput(best, false);
            int outliers = 0;
            for (int r = 0; r < out.getNumRows(); r++) if (out.isOutlier(r)) outliers++;
            j.append("\"transformation\":").append(levels.toString().replace(" ", "")).append(',');
            j.append("\"score\":\"").append(best.getHighestScore().toString()).append("\",");
            j.append("\"suppressed\":").append(outliers);
        }
        System.out.println("RESULT " + j + "}");
    }

    static Metric<?> metric() {
        switch (opt("metric", "entropy")) {
            case "entropy": return Metric.createPrecomputedEntropyMetric(0.1d, false);
            case "entropy_monotonic": return Metric.createPrecomputedEntropyMetric(0.1d, true);
            case "dm": return Metric.createDiscernabilityMetric(false);
            case "dm_star": return Metric.createDiscernabilityMetric(true);
            case "loss": return Metric.createLossMetric(Double.parseDouble(opt("gs", "0.5")));
            default: throw new IllegalArgumentException("unknown metric " + opt("metric", null));
        }
    }
}
